"""Uses a little of one compiled extension package's API (the ones users load most) and prints
deterministic results: `compiled_extensions.py PACKAGE|all [--after FILE]`. Run untraced, under
`growtrace run` and attached (tests/e2e/python_extensions_test.cpp, RealExtensions): exit status
and output must be the same. With --after, it prints "ready", waits until FILE exists (at most
60 s: the test attaches first), then imports and uses the package. The packages come from
tools/python_extensions_requirements.txt."""
import os
import sys
import time


def use_grpc():
    from concurrent import futures

    import grpc
    from grpc._cython import cygrpc

    def say(request, context):
        return request[::-1]

    handler = grpc.method_handlers_generic_handler("echo.Echo", {"Say": grpc.unary_unary_rpc_method_handler(say)})
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=2), handlers=(handler,))
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    try:
        with grpc.insecure_channel(f"127.0.0.1:{port}") as channel:
            call = channel.unary_unary("/echo.Echo/Say")
            replies = [call(f"hello {i}".encode(), timeout=30) for i in range(3)]
    finally:
        server.stop(None).wait(30)
    print("grpc", [r.decode() for r in replies], cygrpc.__name__)


def use_protobuf():
    from google.protobuf import descriptor_pb2, descriptor_pool, message_factory, struct_pb2
    from google.protobuf.internal import api_implementation

    s = struct_pb2.Struct()
    s.update({"name": "growtrace", "sizes": [1, 2, 3], "nested": {"ok": True}})
    again = struct_pb2.Struct.FromString(s.SerializeToString())
    # A message class made at run time from a descriptor, as generated code does at import.
    file = descriptor_pb2.FileDescriptorProto(name="odd.proto", package="odd", syntax="proto3")
    message = file.message_type.add(name="Point")
    message.field.add(name="x", number=1, type=descriptor_pb2.FieldDescriptorProto.TYPE_INT64,
                      label=descriptor_pb2.FieldDescriptorProto.LABEL_OPTIONAL)
    pool = descriptor_pool.DescriptorPool()
    pool.Add(file)
    Point = message_factory.GetMessageClass(pool.FindMessageTypeByName("odd.Point"))
    p = Point(x=42)
    print("protobuf", api_implementation.Type(), sorted(again.keys()), again["sizes"][2], Point.FromString(p.SerializeToString()).x,
          type(p).__name__)


def use_numpy():
    import numpy as np

    a = np.arange(12, dtype=np.int64).reshape(3, 4)
    rec = np.zeros(3, dtype=[("id", "i4"), ("score", "f8")])
    rec["id"] = [3, 1, 2]
    rec["score"] = [0.5, 1.5, 2.5]
    rec.sort(order="id")
    print("numpy", int(a.sum()), (a @ a.T).tolist(), rec["score"].tolist(), np.linalg.det(np.eye(3) * 2).round(6))


def use_orjson():
    import orjson

    data = {"b": [1, 2.5, None, True], "a": {"nested": "text ü"}}
    text = orjson.dumps(data, option=orjson.OPT_SORT_KEYS)
    print("orjson", text.decode(), orjson.loads(text) == data)


def use_ujson():
    import ujson

    data = {"b": [1, 2.5, None, True], "a": {"nested": "text"}}
    text = ujson.dumps(data, sort_keys=True)
    print("ujson", text, ujson.loads(text) == data)


def use_yaml():
    import yaml

    text = "name: growtrace\nsizes: [1, 2, 3]\nnested: {ok: true}\n"
    data = yaml.load(text, Loader=yaml.CSafeLoader)
    print("yaml", yaml.__with_libyaml__, sorted(data), yaml.dump(data, Dumper=yaml.CSafeDumper, sort_keys=True).strip())


def use_pydantic_core():
    from pydantic_core import SchemaValidator, ValidationError, core_schema

    v = SchemaValidator(core_schema.typed_dict_schema({
        "name": core_schema.typed_dict_field(core_schema.str_schema()),
        "count": core_schema.typed_dict_field(core_schema.int_schema(ge=0)),
    }))
    good = v.validate_python({"name": "x", "count": "3"})
    try:
        v.validate_python({"name": "x", "count": -1})
        bad = "accepted"
    except ValidationError as e:
        bad = e.errors()[0]["type"]
    print("pydantic_core", good, bad)


def use_lxml():
    from lxml import etree

    root = etree.fromstring(b"<root><item id='1'>a</item><item id='2'>b</item></root>")
    etree.SubElement(root, "item", id="3").text = "c"
    print("lxml", root.xpath("//item[@id>1]/text()"), etree.tostring(root).decode())


def use_cryptography():
    from cryptography.hazmat.primitives import hashes
    from cryptography.hazmat.primitives.ciphers.aead import AESGCM

    digest = hashes.Hash(hashes.SHA256())
    digest.update(b"growtrace")
    aead = AESGCM(bytes(range(16)))
    sealed = aead.encrypt(bytes(12), b"secret", b"aad")
    print("cryptography", digest.finalize().hex()[:16], sealed.hex(), aead.decrypt(bytes(12), sealed, b"aad"))


def use_pandas():
    import pandas as pd

    frame = pd.DataFrame({"team": ["a", "b", "a", "c", "b"], "score": [3, 5, 4, 1, 2],
                          "day": pd.to_datetime(["2026-01-01", "2026-01-02", "2026-01-02", "2026-01-03", "2026-01-05"])})
    totals = frame.groupby("team")["score"].sum().to_dict()
    names = pd.DataFrame({"team": ["a", "b", "c"], "name": ["ants", "bees", "cats"]})
    merged = frame.merge(names, on="team").sort_values(["day", "team"])
    print("pandas", totals, merged["name"].tolist(), merged["day"].dt.day.tolist(), frame.to_csv(index=False).count("\n"))


def use_psycopg2():
    import psycopg2
    from psycopg2 import extensions

    quoted = [extensions.adapt(v).getquoted().decode() for v in (42, 2.5, None, True, b"\x00ab")]
    dsn = extensions.parse_dsn("dbname=app user=growtrace host=127.0.0.1 port=1")
    try:  # libpq itself: port 1 refuses at once
        psycopg2.connect(dbname="app", host="127.0.0.1", port=1, connect_timeout=5)
        refused = "connected"
    except psycopg2.OperationalError:
        refused = "OperationalError"
    print("psycopg2", quoted, sorted(dsn.items()), refused)


USES = {
    "grpc": use_grpc,
    "protobuf": use_protobuf,
    "numpy": use_numpy,
    "orjson": use_orjson,
    "ujson": use_ujson,
    "yaml": use_yaml,
    "pydantic_core": use_pydantic_core,
    "lxml": use_lxml,
    "cryptography": use_cryptography,
    "pandas": use_pandas,
    "psycopg2": use_psycopg2,
}


def wait_for(path):
    print("ready", flush=True)
    deadline = time.monotonic() + 60
    while not os.path.exists(path) and time.monotonic() < deadline:
        time.sleep(0.02)


if __name__ == "__main__":
    if len(sys.argv) > 3 and sys.argv[2] == "--after":
        wait_for(sys.argv[3])
    for use in (USES.values() if sys.argv[1] == "all" else [USES[sys.argv[1]]]):
        use()
