"""A real library's per-class registry that keeps growing: marshmallow's.

Every subclass of marshmallow's ``Schema`` registers itself by name in
``marshmallow.class_registry._registry`` (so that ``fields.Nested("Name")`` can find it), under
its class name and its module-qualified name, and the registry keeps it for good. A service that
validates customer-defined forms builds one Schema class per form, named after the form, each
time a form is submitted: the registry gains two keys per new form and holds every class, its
fields and their validators alive. growtrace must name the registry, not only the many stacks
that make the classes.

    python marshmallow_registry.py [--requests N] [--walks W]

At least N requests; under growtrace more when the walks need them (see main).

Needs marshmallow (tools/python_requirements.txt). Prints one summary line.
"""

from __future__ import annotations

import argparse
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _common import AgentWalks, Summary  # noqa: E402

from marshmallow import Schema, fields, validate  # noqa: E402
from marshmallow import class_registry  # noqa: E402

FIELD_TYPES = {
    "text": lambda: fields.Str(required=True, validate=validate.Length(max=200)),
    "number": lambda: fields.Int(validate=validate.Range(min=0)),
    "email": lambda: fields.Email(),
}


def form_definition(form_id: int) -> dict:
    # What the service would read from its database: a form of a few typed fields.
    kinds = list(FIELD_TYPES)
    return {"id": form_id, "fields": [{"name": f"q{k}", "type": kinds[(form_id + k) % len(kinds)]} for k in range(4)]}


def schema_for(form: dict) -> type:
    declared = {f["name"]: FIELD_TYPES[f["type"]]() for f in form["fields"]}
    return type(f"Form{form['id']}Schema", (Schema,), declared)  # mark: schema_class


def submission(form: dict) -> dict:
    values = {"text": "an answer", "number": 42, "email": "someone@example.org"}
    return {f["name"]: values[f["type"]] for f in form["fields"]}


def handle(form_id: int) -> dict:
    form = form_definition(form_id)
    return schema_for(form)().load(submission(form))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--requests", type=int, default=3000)
    parser.add_argument("--pause-every", type=int, default=50)
    parser.add_argument("--pause", type=float, default=0.03)
    parser.add_argument("--walks", type=int, default=4,
                        help="at least this many of growtrace's container walks, one per quarter (0: any)")
    args = parser.parse_args()
    summary = Summary("marshmallow_registry")
    # Forms keep coming until each phase has both its share of the requests and a walk of its
    # own: walks are timed and get rare as the heap grows, and the service must not idle while
    # it waits (idle spells would read as growth that stopped).
    walks = AgentWalks()
    first = walks.count()
    phases = max(args.walks, 1)
    deadline = time.monotonic() + 120
    loaded = i = 0
    for phase in range(1, phases + 1):
        while i < args.requests * phase // phases or (
                first is not None and args.walks and walks.count() - first < phase and time.monotonic() < deadline):
            loaded += len(handle(i))
            i += 1
            if i % args.pause_every == 0:
                time.sleep(args.pause)
    summary["requests"] = i
    summary["loaded_fields"] = loaded
    summary["registry_keys"] = len(class_registry._registry)
    summary.print()


if __name__ == "__main__":
    main()
