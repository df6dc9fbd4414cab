"""The gateway tests' helpers, under the name they import (`import test_gateway_support as gw`): they
live in tests/support/gateway.py. This module holds no tests."""

import os
import sys

_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
if _ROOT not in sys.path:  # imported as a top-level module from tests/integration
    sys.path.insert(0, _ROOT)

from tests.support.gateway import *  # noqa: E402,F401,F403
