# Sourced by the test scripts that run Python: they reach it only through
# $DSV4_PYTHON, which `make test` sets to the virtual environment that
# `make deps` made (build/venv). Sets PY, or prints a FAIL line and exits.
if [ -z "${DSV4_PYTHON:-}" ] || [ ! -x "$DSV4_PYTHON" ]; then
    echo "FAIL $(basename "$0" .sh): DSV4_PYTHON is not an executable python (make deps makes build/venv; make test sets it)"
    exit 1
fi
PY=$DSV4_PYTHON
