"""Settings for the integration tests. The `slow` marker (skipped unless
STRATBENCH_SLOW=1) is tests/conftest.py's, for every test folder.

pytest imports every conftest.py as the module `conftest`, so for tests in this folder
`from conftest import describe` finds THIS file, not tests/conftest.py. It therefore
re-exports the plain helpers of tests/conftest.py (functions and constants; not its
fixtures or hooks, which pytest already registers from there).
"""

import importlib.util
import pathlib

_SHARED = pathlib.Path(__file__).resolve().parent.parent / "conftest.py"
_spec = importlib.util.spec_from_file_location("stratbench_shared_conftest", _SHARED)
_shared = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_shared)


def _is_fixture(obj):
    """True for a @pytest.fixture function (pytest 7 marks it; pytest 8 wraps it)."""
    return hasattr(obj, "_pytestfixturefunction") or \
        type(obj).__name__ == "FixtureFunctionDefinition"


for _name, _obj in vars(_shared).items():
    if not _name.startswith(("_", "pytest_")) and not _is_fixture(_obj) and _name not in globals():
        globals()[_name] = _obj
