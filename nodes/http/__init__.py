"""HTTP nodes: ``http.request`` (call a web API; also an agent's tool,
limited to the designer's allowed_hosts), ``trigger.webhook`` (serve an
endpoint: each request is a message), ``http.response`` (answer it) and
``http.crawl`` (read a site page by page; a background tool).

httpx is imported when the first request goes out, never here: the
designer's palette imports every node package."""

from .crawl import HttpCrawl
from .request import HttpRequest
from .webhook import HttpResponse, Webhook

__all__ = ["HttpCrawl", "HttpRequest", "HttpResponse", "Webhook"]
