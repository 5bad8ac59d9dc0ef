"""A WSGI app whose handler has the openai-python #2672 pattern, for a pool of gunicorn workers.

Each request calls ``client.responses.parse(..., text_format=Fact)`` against the local mock
server (``OPENAI_BASE_URL``, see ../openai_repro/mock_server.py) from a NEW thread, as a
handler that runs its upstream call in a thread of its own does: pydantic 2.12 builds a fresh
``ParsedResponseOutputMessage[Fact]`` per thread and openai's unbounded
``_CachedTypeAdapter`` grows in every worker, for ever.

``GT_APP_FIX=1`` is the fix on the application's side: every call runs on one long-lived
thread (a single-worker executor made once per process), so the class is built once and the
cache stops growing after the first request.

    gunicorn --workers 2 --bind 127.0.0.1:PORT --chdir test_programs/python/pool openai_app:application
"""

from __future__ import annotations

import concurrent.futures
import json
import os
import sys
import threading

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "openai_repro"))

from repro import Fact, one_request  # noqa: E402  (the reproduction's client call)
from openai import OpenAI  # noqa: E402

_FIX = os.environ.get("GT_APP_FIX") == "1"
_client: OpenAI | None = None
_executor: concurrent.futures.ThreadPoolExecutor | None = None


def _client_for_this_process() -> OpenAI:
    # Made in the worker, after gunicorn forked it: a client's connection pool is per process.
    global _client
    if _client is None:
        _client = OpenAI(base_url=os.environ["OPENAI_BASE_URL"], api_key="test", max_retries=0)
    return _client


def _ask(errors: list) -> None:
    one_request(_client_for_this_process(), errors)


def application(environ, start_response):
    global _executor
    errors: list = []
    if _FIX:
        if _executor is None:
            _executor = concurrent.futures.ThreadPoolExecutor(max_workers=1)
        _executor.submit(_ask, errors).result()
    else:
        t = threading.Thread(target=_ask, args=(errors,))  # mark: thread_per_request
        t.start()
        t.join()
    body = json.dumps({"pid": os.getpid(), "errors": errors, "fact_class": Fact.__name__}).encode()
    start_response("500 Internal Server Error" if errors else "200 OK",
                   [("Content-Type", "application/json"), ("Content-Length", str(len(body)))])
    return [body]
