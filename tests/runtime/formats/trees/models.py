"""Small tree models trained here and saved as their libraries save them."""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from modelport.manifest import Manifest
from modelport.runtime.formats.trees.describe import describe


@dataclass(frozen=True)
class Saved:
    """A model file and the original's own predictions."""

    fmt: str
    path: Path
    rows: np.ndarray
    predict: Callable[[np.ndarray], dict[str, np.ndarray]]


def iris() -> tuple[np.ndarray, np.ndarray]:
    from sklearn.datasets import load_iris

    x, y = load_iris(return_X_y=True)
    return x.astype(np.float32), y


def regression() -> tuple[np.ndarray, np.ndarray]:
    from sklearn.datasets import make_regression

    x, y = make_regression(n_samples=120, n_features=5, noise=0.1, random_state=0)
    return x.astype(np.float32), y


def _classifier(model: Any) -> Callable[[np.ndarray], dict[str, np.ndarray]]:
    return lambda rows: {
        "label": np.asarray(model.predict(rows)).astype(np.int64).reshape(-1),
        "probabilities": np.asarray(model.predict_proba(rows), dtype=np.float32),
    }


def _regressor(model: Any) -> Callable[[np.ndarray], dict[str, np.ndarray]]:
    return lambda rows: {"prediction": np.asarray(model.predict(rows), dtype=np.float32)}


def save_all(folder: Path) -> dict[str, Saved]:
    """One model of each kind the tree formats serve, saved under ``folder``."""
    import lightgbm as lgb
    import skops.io as sio
    import xgboost as xgb
    from sklearn.ensemble import GradientBoostingRegressor, RandomForestClassifier

    folder.mkdir(parents=True, exist_ok=True)
    xc, yc = iris()
    xr, yr = regression()
    binary = (yc == 2).astype(int)
    saved: dict[str, Saved] = {}

    xgb_multi = xgb.XGBClassifier(n_estimators=8, max_depth=3, n_jobs=1).fit(xc, yc)
    for suffix in ("json", "ubj"):
        path = folder / f"xgb-multi.{suffix}"
        xgb_multi.save_model(path)
        saved[f"xgboost-multiclass-{suffix}"] = Saved("xgboost", path, xc, _classifier(xgb_multi))
    xgb_binary = xgb.XGBClassifier(n_estimators=8, max_depth=3, n_jobs=1).fit(xc, binary)
    xgb_binary.save_model(folder / "xgb-binary.json")
    saved["xgboost-binary"] = Saved(
        "xgboost", folder / "xgb-binary.json", xc, _classifier(xgb_binary)
    )
    xgb_reg = xgb.XGBRegressor(n_estimators=8, max_depth=3, n_jobs=1).fit(xr, yr)
    xgb_reg.save_model(folder / "xgb-reg.json")
    saved["xgboost-regression"] = Saved("xgboost", folder / "xgb-reg.json", xr, _regressor(xgb_reg))

    lgb_multi = lgb.LGBMClassifier(n_estimators=8, verbose=-1, n_jobs=1).fit(xc, yc)
    lgb_multi.booster_.save_model(folder / "lgb-multi.txt")
    saved["lightgbm-multiclass"] = Saved(
        "lightgbm", folder / "lgb-multi.txt", xc, _classifier(lgb_multi)
    )
    lgb_binary = lgb.LGBMClassifier(n_estimators=8, verbose=-1, n_jobs=1).fit(xc, binary)
    lgb_binary.booster_.save_model(folder / "lgb-binary.txt")
    saved["lightgbm-binary"] = Saved(
        "lightgbm", folder / "lgb-binary.txt", xc, _classifier(lgb_binary)
    )
    lgb_reg = lgb.LGBMRegressor(n_estimators=8, verbose=-1, n_jobs=1).fit(xr, yr)
    lgb_reg.booster_.save_model(folder / "lgb-reg.txt")
    saved["lightgbm-regression"] = Saved(
        "lightgbm", folder / "lgb-reg.txt", xr, _regressor(lgb_reg)
    )

    forest = RandomForestClassifier(n_estimators=5, max_depth=4, random_state=0).fit(xc, yc)
    sio.dump(forest, folder / "forest.skops")
    saved["sklearn-forest"] = Saved("sklearn", folder / "forest.skops", xc, _classifier(forest))
    boosted = GradientBoostingRegressor(n_estimators=8, max_depth=2, random_state=0).fit(xr, yr)
    sio.dump(boosted, folder / "boosted.skops")
    saved["sklearn-boosted"] = Saved("sklearn", folder / "boosted.skops", xr, _regressor(boosted))
    return saved


def manifest_of(saved: Saved, **extra: Any) -> Manifest:
    """The manifest ``push`` would make for the file, with ``extra`` fields over it."""
    data = saved.path.read_bytes()
    fields: dict[str, Any] = {
        "format": saved.fmt,
        "license": "MIT",
        "files": [
            {
                "path": saved.path.name,
                "digest": "sha256:" + hashlib.sha256(data).hexdigest(),
                "size": len(data),
            }
        ],
        **describe(saved.fmt, saved.path),
        **extra,
    }
    return Manifest.model_validate(fields)
