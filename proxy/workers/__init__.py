"""`serve --workers N`: a supervisor process and N worker processes serving one port."""

from proxy.workers.supervisor import serve_workers

__all__ = ["serve_workers"]
