"""HTTP nodes: ``http.request`` (call a web API; also an agent's tool,
limited to the designer's allowed_hosts), ``trigger.webhook`` (serve an
endpoint: each request is a message) and ``http.response`` (answer it).

httpx is imported when the first request goes out, never here: the
designer's palette imports every node package."""

from .request import HttpRequest
from .webhook import HttpResponse, Webhook

__all__ = ["HttpRequest", "HttpResponse", "Webhook"]
