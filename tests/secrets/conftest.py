from tests.serving.conftest import make_serving  # noqa: F401  (fixture)
