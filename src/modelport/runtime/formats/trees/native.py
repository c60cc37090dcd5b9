"""Tree models loaded by their own libraries, with one output contract.

A classifier answers ``label`` (INT64, the class index) and ``probabilities`` (FP32,
one column per class); a regressor answers ``prediction`` (FP32). One input: the FP32
feature matrix ``[batch, features]``.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, Protocol

import numpy as np

from modelport.errors import InvalidInput, Unprocessable

TreeTask = Literal["classification", "regression"]
LABEL = "label"
PROBABILITIES = "probabilities"
PREDICTION = "prediction"

TRUSTED_SKLEARN_TYPES = frozenset(
    {
        "sklearn.tree._tree.Tree",
        "sklearn.ensemble._gb_losses.BinomialDeviance",
        "sklearn._loss.loss.HalfBinomialLoss",
        "sklearn._loss.loss.HalfMultinomialLoss",
        "sklearn._loss.loss.HalfSquaredError",
        "sklearn._loss.link.IdentityLink",
        "sklearn._loss.link.LogitLink",
        "sklearn._loss.link.MultinomialLogit",
        "sklearn._loss._loss.CyHalfBinomialLoss",
        "sklearn._loss._loss.CyHalfMultinomialLoss",
        "sklearn._loss._loss.CyHalfSquaredError",
        "sklearn.ensemble._hist_gradient_boosting.predictor.TreePredictor",
        "sklearn.ensemble._hist_gradient_boosting.binning._BinMapper",
        "numpy.ndarray",
        "numpy.dtype",
    }
)
"""Types skops does not trust by default that a tree ensemble of scikit-learn holds. A
``.skops`` file naming any other untrusted type is refused (``unsafe_content``): skops
builds only trusted types, and this list is the platform's, not the publisher's."""


@dataclass(frozen=True, slots=True)
class TreeShape:
    """What a tree model is, read from its file."""

    task: TreeTask
    features: int
    classes: int = 0
    """Classes of a classifier (two for a binary one); 0 for a regressor."""

    def output_names(self) -> tuple[str, ...]:
        return (LABEL, PROBABILITIES) if self.task == "classification" else (PREDICTION,)


class NativeTree(Protocol):
    """A tree model in its library's memory."""

    shape: TreeShape

    def predict(self, features: np.ndarray) -> dict[str, np.ndarray]:
        """The contract's outputs for an FP32 ``[batch, features]`` matrix."""
        ...

    def converter_input(self) -> Any:
        """What the ONNX converter takes (the library's own model object)."""
        ...


def classified(probabilities: np.ndarray) -> dict[str, np.ndarray]:
    probabilities = np.asarray(probabilities, dtype=np.float32)
    return {
        LABEL: probabilities.argmax(axis=1).astype(np.int64),
        PROBABILITIES: probabilities,
    }


def regressed(values: np.ndarray) -> dict[str, np.ndarray]:
    return {PREDICTION: np.asarray(values, dtype=np.float32).reshape(-1)}


class XGBoostTree:
    """An XGBoost model saved with ``save_model`` (JSON or UBJSON)."""

    def __init__(self, path: Path) -> None:
        import xgboost as xgb

        try:
            booster = xgb.Booster(model_file=str(path))
            config = json.loads(booster.save_config())
        except Exception as exc:  # xgboost raises its own XGBoostError on a bad file
            raise _unreadable(path, "XGBoost", exc) from None
        learner = config["learner"]
        objective = str(learner["objective"]["name"])
        features = int(learner["learner_model_param"]["num_feature"])
        if objective.startswith(("binary:", "multi:")):
            classes = max(2, int(learner["learner_model_param"].get("num_class", "0") or 0))
            model: Any = xgb.XGBClassifier(n_jobs=1)
            self.shape = TreeShape("classification", features, classes)
        elif objective.startswith(("reg:", "count:")):
            model = xgb.XGBRegressor(n_jobs=1)
            self.shape = TreeShape("regression", features)
        else:
            raise _unsupported(path, f"the XGBoost objective '{objective}'")
        model.load_model(str(path))
        self._model = model

    def predict(self, features: np.ndarray) -> dict[str, np.ndarray]:
        if self.shape.task == "classification":
            return classified(self._model.predict_proba(features))
        return regressed(self._model.predict(features))

    def converter_input(self) -> Any:
        return self._model


class LightGBMTree:
    """A LightGBM booster saved with ``save_model`` (its text format)."""

    def __init__(self, path: Path) -> None:
        import lightgbm as lgb

        try:
            booster = lgb.Booster(model_file=str(path))
            dumped = booster.dump_model(num_iteration=1)
        except Exception as exc:  # LightGBM raises LightGBMError on a bad file
            raise _unreadable(path, "LightGBM", exc) from None
        objective = str(dumped.get("objective", "")).split(" ")[0]
        features = booster.num_feature()
        if objective in ("binary", "cross_entropy", "multiclass", "multiclassova"):
            classes = 2 if objective in ("binary", "cross_entropy") else int(dumped["num_class"])
            self.shape = TreeShape("classification", features, classes)
        elif objective in ("regression", "regression_l1", "huber", "fair", "poisson",
                           "quantile", "mape", "gamma", "tweedie"):  # fmt: skip
            self.shape = TreeShape("regression", features)
        else:
            raise _unsupported(path, f"the LightGBM objective '{objective}'")
        self._booster = booster

    def predict(self, features: np.ndarray) -> dict[str, np.ndarray]:
        raw = np.asarray(self._booster.predict(features, num_threads=1))
        if self.shape.task == "regression":
            return regressed(raw)
        if raw.ndim == 1:  # a binary model answers P(class 1)
            raw = np.stack([1.0 - raw, raw], axis=1)
        return classified(raw)

    def converter_input(self) -> Any:
        return self._booster


class SklearnTree:
    """A scikit-learn tree ensemble saved with ``skops.io.dump``."""

    def __init__(self, path: Path) -> None:
        import skops.io as sio

        try:
            untrusted = set(sio.get_untrusted_types(file=str(path)))
        except Exception as exc:  # a file that is not a skops archive
            raise _unreadable(path, "skops", exc) from None
        refused = sorted(untrusted - TRUSTED_SKLEARN_TYPES)
        if refused:
            raise InvalidInput(
                f"{path.name} holds types the platform does not build: {', '.join(refused)}",
                code="unsafe_content",
                types=refused,
            )
        try:
            model = sio.load(str(path), trusted=sorted(untrusted))
        except Exception as exc:
            raise _unreadable(path, "skops", exc) from None
        module = type(model).__module__
        if not module.startswith(("sklearn.ensemble", "sklearn.tree")):
            raise _unsupported(path, f"{type(model).__name__} (not a scikit-learn tree model)")
        features = int(getattr(model, "n_features_in_", 0))
        if hasattr(model, "predict_proba") and hasattr(model, "classes_"):
            self.shape = TreeShape("classification", features, len(model.classes_))
        else:
            self.shape = TreeShape("regression", features)
        self._model = model

    def predict(self, features: np.ndarray) -> dict[str, np.ndarray]:
        if self.shape.task == "classification":
            return classified(self._model.predict_proba(features))
        return regressed(self._model.predict(features))

    def converter_input(self) -> Any:
        return self._model


def _unreadable(path: Path, library: str, exc: Exception) -> Unprocessable:
    reason = str(exc).strip().splitlines()[0][:300] if str(exc).strip() else type(exc).__name__
    return Unprocessable(
        f"{path.name} is not a model {library} can read: {reason}", code="bad_model_file"
    )


def _unsupported(path: Path, what: str) -> Unprocessable:
    return Unprocessable(f"{path.name}: {what} is not served", code="unsupported_model")
