"""A local stand-in for the OpenAI Responses API, enough for ``client.responses.parse``.

Standard library only. Listens on 127.0.0.1 with an OS-chosen port and answers
``POST /v1/responses`` with a completed response whose single ``message`` output item holds
one ``output_text`` part containing ``{"fact": "..."}`` -- the shape the real API returns
for a structured-output request, and what openai 1.107.0's ``Response`` model validates
(required fields: id, created_at, model, object, output, parallel_tool_calls, tool_choice,
tools).

Run standalone:  python mock_server.py [--port-file PATH]
It prints ``PORT <n>`` on stdout (and writes ``<n>`` to PATH) once it is listening, then
serves until killed. ``start_in_thread()`` runs it in a daemon thread of the caller.
"""

from __future__ import annotations

import argparse
import itertools
import json
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

_counter = itertools.count(1)


def response_body(model: str, fact: str) -> dict:
    n = next(_counter)
    text = json.dumps({"fact": fact})
    return {
        "id": f"resp_mock{n:08d}",
        "object": "response",
        "created_at": int(time.time()),
        "status": "completed",
        "error": None,
        "incomplete_details": None,
        "instructions": None,
        "max_output_tokens": None,
        "model": model,
        "output": [
            {
                "id": f"msg_mock{n:08d}",
                "type": "message",
                "status": "completed",
                "role": "assistant",
                "content": [
                    {
                        "type": "output_text",
                        "text": text,
                        "annotations": [],
                        "logprobs": [],
                    }
                ],
            }
        ],
        "parallel_tool_calls": True,
        "previous_response_id": None,
        "reasoning": {"effort": None, "summary": None},
        "store": True,
        "temperature": 1.0,
        "text": {
            "format": {
                "type": "json_schema",
                "name": "Fact",
                "strict": True,
                "schema": {
                    "type": "object",
                    "properties": {"fact": {"type": "string", "title": "Fact"}},
                    "required": ["fact"],
                    "additionalProperties": False,
                    "title": "Fact",
                },
            }
        },
        "tool_choice": "auto",
        "tools": [],
        "top_p": 1.0,
        "truncation": "disabled",
        "usage": {
            "input_tokens": 12,
            "input_tokens_details": {"cached_tokens": 0},
            "output_tokens": 9,
            "output_tokens_details": {"reasoning_tokens": 0},
            "total_tokens": 21,
        },
        "user": None,
        "metadata": {},
    }


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive, like the real API
    # Headers and body leave in one segment: without these, Nagle's algorithm and the
    # client's delayed ACK add ~40 ms to every keep-alive request.
    disable_nagle_algorithm = True
    wbufsize = 1 << 16

    def do_POST(self) -> None:  # noqa: N802 (http.server naming)
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        if self.path.rstrip("/") != "/v1/responses":
            self._send(404, {"error": {"message": f"no route {self.path}", "type": "invalid_request_error"}})
            return
        try:
            request = json.loads(raw or b"{}")
        except ValueError:
            self._send(400, {"error": {"message": "body is not JSON", "type": "invalid_request_error"}})
            return
        model = request.get("model") or "gpt-4o-mini"
        fact = "Honey never spoils."
        self._send(200, response_body(model, fact))

    def _send(self, status: int, body: dict) -> None:
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.send_header("x-request-id", "req_mock")
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, format: str, *args: object) -> None:  # quiet
        pass


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True


def make_server() -> ThreadingHTTPServer:
    return _Server(("127.0.0.1", 0), _Handler)


def start_in_thread() -> tuple[ThreadingHTTPServer, int]:
    """Starts the server in a daemon thread; returns (server, port)."""
    server = make_server()
    port = server.server_address[1]
    threading.Thread(target=server.serve_forever, name="mock-openai", daemon=True).start()
    return server, port


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port-file", help="write the chosen port to this file")
    args = parser.parse_args(argv)
    server = make_server()
    port = server.server_address[1]
    if args.port_file:
        with open(args.port_file + ".tmp", "w") as f:
            f.write(f"{port}\n")
        import os

        os.replace(args.port_file + ".tmp", args.port_file)
    print(f"PORT {port}", flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
