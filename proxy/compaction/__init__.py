"""Compaction: making a session's past fit the model's window.

Glossary (each word means this and only this in the code):
- **strategy**: a policy that, given a history over budget, returns a new window and
  the units it kept and evicted (`strategies/`; `summarize`, `anchored`, `turns`,
  `reset`, `full`, and the wrappers `chain` and `background(x)`). Pure but for
  awaiting the summarizer; it never writes.
- **runner**: the per-request step that reads the budget, asks the breaker, runs the
  strategy and gates its result (`runner.fit`). ContextChef calls it the Janitor.
- **breaker**: a session's circuit breaker over consecutive failures (`breaker.py`).
- **window**: what the model sees of a session's past: lineage ids, boundary, summary
  or anchor, lifted pinned and leading messages (`proxy/context/window.py`). Its id is
  `win_N`; `FIRST_WINDOW` is `win_0`.
- **lineage**: a window's `{first, previous, current}` ids; it advances one step each
  time a compaction lands.
- **unit**: consecutive journal turns cut or kept together (a user message and all that
  answers it, tool rounds included).
- **span**: the evicted units' messages; archived under the id of the window that
  evicted them and cited as `context://archive/<window id>`.
- **landing**: writing a result atomically, only if the window it was computed from is
  still current (`landing.py`); otherwise the result is stale and dropped.
- **background job**: a compaction run after the answer, off the hot path
  (`jobs.BackgroundJobs` holds them; `proxy/turn/background.py` builds them).
"""

from proxy.compaction.breaker import Breaker
from proxy.compaction.jobs import BackgroundJobs
from proxy.compaction.landing import Landing
from proxy.compaction.runner import Fitted, Overflow, fit
from proxy.compaction.summarizer import make_summarizer

__all__ = ["BackgroundJobs", "Breaker", "Fitted", "Landing", "Overflow", "fit", "make_summarizer"]
