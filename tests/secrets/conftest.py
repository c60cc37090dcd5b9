import pytest

from modelport.config import Settings
from tests.serving.conftest import (
    LOOPBACK_BACKENDS,
    make_serving,  # noqa: F401  (fixture)
)


@pytest.fixture
def settings(settings: Settings) -> Settings:
    """The suite's settings, with the loopback address these tests declare backends at
    allowed (``backend_allow_hosts``)."""
    return settings.model_copy(update={"backend_allow_hosts": LOOPBACK_BACKENDS})
