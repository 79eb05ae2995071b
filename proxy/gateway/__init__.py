"""The team gateway: gateway keys, allow-lists, rpm/tpm limits and budgets across replicas.

The HTTP edge (`proxy.handlers.gateway`) is imported by the app and the handlers
directly; this package's surface is what the rest of the proxy uses by value.
"""

from proxy.gateway.limits import Admission, Gate, no_gate, settle
from proxy.gateway.policy import KeyPolicy
from proxy.gateway.service import Gateway, Principal, exposure_problem

__all__ = ["Admission", "Gate", "Gateway", "KeyPolicy", "Principal", "exposure_problem", "no_gate", "settle"]
