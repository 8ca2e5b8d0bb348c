"""The OTLP receiver of tests/otlp.rs, built from the official OpenTelemetry
Python classes (opentelemetry-proto) and gRPC (grpcio), from PyPI
(scripts/fetch-otlp-receiver.sh).

    receiver.py serve DIR [--port N] [--http] [--delay S] [--fail CODE]
                            listens on 127.0.0.1 (port N, or a free one;
                            printed as `listening PORT`), over gRPC or
                            with --http OTLP/HTTP (POST
                            /v1development/profiles), and keeps each
                            profiles export it gets as DIR/NNNN.bin, as
                            sent; --delay: answers S seconds late; --fail:
                            answers every export with that gRPC code
                            (UNAVAILABLE, INVALID_ARGUMENT; over HTTP 503
                            and 400), keeping nothing
    receiver.py decode DIR  decodes them with the official classes and
                            prints one JSON line per sample:
                            {"profile": sample type, "unit": ...,
                             "resource": {attributes}, "value": N,
                             "frames": [function names, leaf first],
                             "mappings": [mapping file names, leaf first],
                             "build_ids": [their GNU build IDs, hex],
                             "types": [profile.frame.type of each],
                             "files": [their functions' files],
                             "lines": [their lines, 0 unknown],
                             "attributes": {sample attributes}}
    receiver.py dump DIR    prints each export whole, one JSON line each, as
                            the official classes' JSON mapping gives it
                            (field names as in the proto; 64-bit integers
                            as strings, default values left out)
"""

import json
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from concurrent import futures
from pathlib import Path

import grpc
from opentelemetry.proto.collector.profiles.v1development import (
    profiles_service_pb2 as service,
    profiles_service_pb2_grpc as service_grpc,
)


class Receiver(service_grpc.ProfilesServiceServicer):
    def __init__(self, out, delay, fail):
        self.out = out
        self.delay = delay
        self.fail = fail
        self.n = 0
        self.lock = threading.Lock()

    def keep(self, data, active=lambda: True):
        time.sleep(self.delay)
        # What the sender gave up on (its deadline passed) is not kept.
        if self.fail or not active():
            return False
        with self.lock:
            self.n += 1
            (self.out / f"{self.n:04}.bin").write_bytes(data)
        return True

    def Export(self, request, context):
        if not self.keep(request.SerializeToString(), context.is_active):
            context.abort(getattr(grpc.StatusCode, self.fail or "CANCELLED"), "told to fail")
        return service.ExportProfilesServiceResponse()


def http_handler(receiver):
    class Handler(BaseHTTPRequestHandler):
        def do_POST(self):
            body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
            if self.path != "/v1development/profiles" or self.headers.get("Content-Type") != "application/x-protobuf":
                self.send_response(404)
                self.end_headers()
                return
            # The official class must parse what was sent.
            service.ExportProfilesServiceRequest().ParseFromString(body)
            if receiver.keep(body):
                answer = service.ExportProfilesServiceResponse().SerializeToString()
                self.send_response(200)
            else:
                answer = b""
                self.send_response({"UNAVAILABLE": 503}.get(receiver.fail, 400))
            self.send_header("Content-Type", "application/x-protobuf")
            self.send_header("Content-Length", str(len(answer)))
            self.end_headers()
            self.wfile.write(answer)

        def log_message(self, *args):
            pass
    return Handler


def serve(out, args):
    out.mkdir(parents=True, exist_ok=True)
    port = int(flag(args, "--port", 0))
    receiver = Receiver(out, float(flag(args, "--delay", 0)), flag(args, "--fail", None))
    if "--http" in args:
        server = ThreadingHTTPServer(("127.0.0.1", port), http_handler(receiver))
        print(f"listening {server.server_address[1]}", flush=True)
        server.serve_forever()
        return
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
    service_grpc.add_ProfilesServiceServicer_to_server(receiver, server)
    port = server.add_insecure_port(f"127.0.0.1:{port}")
    server.start()
    print(f"listening {port}", flush=True)
    server.wait_for_termination()


def flag(args, name, default):
    return args[args.index(name) + 1] if name in args else default


def value_of(any_value):
    kind = any_value.WhichOneof("value")
    return getattr(any_value, kind) if kind else None


def decode(out):
    for f in sorted(out.glob("*.bin")):
        req = service.ExportProfilesServiceRequest()
        req.ParseFromString(f.read_bytes())
        d = req.dictionary
        s = d.string_table
        attr = lambda i: (s[d.attribute_table[i].key_strindex], value_of(d.attribute_table[i].value))
        for rp in req.resource_profiles:
            resource = {kv.key: value_of(kv.value) for kv in rp.resource.attributes}
            for sp in rp.scope_profiles:
                for p in sp.profiles:
                    for sample in p.samples:
                        locs = [d.location_table[i] for i in d.stack_table[sample.stack_index].location_indices]
                        print(json.dumps({
                            "export": f.name,
                            "time": p.time_unix_nano,
                            "profile": s[p.sample_type.type_strindex],
                            "unit": s[p.sample_type.unit_strindex],
                            "resource": resource,
                            "value": sum(sample.values),
                            "frames": [s[d.function_table[line.function_index].name_strindex]
                                       for loc in locs for line in loc.lines],
                            "mappings": [s[d.mapping_table[loc.mapping_index].filename_strindex] for loc in locs],
                            "build_ids": [dict(attr(i) for i in d.mapping_table[loc.mapping_index].attribute_indices)
                                          .get("process.executable.build_id.gnu", "") for loc in locs],
                            "types": [dict(attr(i) for i in loc.attribute_indices).get("profile.frame.type", "")
                                      for loc in locs],
                            "files": [s[d.function_table[line.function_index].filename_strindex]
                                      for loc in locs for line in loc.lines],
                            "lines": [line.line for loc in locs for line in loc.lines],
                            "attributes": dict(attr(i) for i in sample.attribute_indices),
                        }))


def dump(out):
    from google.protobuf import json_format
    for f in sorted(out.glob("*.bin")):
        req = service.ExportProfilesServiceRequest()
        req.ParseFromString(f.read_bytes())
        print(json.dumps(json_format.MessageToDict(req, preserving_proto_field_name=True)))


if __name__ == "__main__":
    if sys.argv[1] == "serve":
        serve(Path(sys.argv[2]), sys.argv[3:])
    elif sys.argv[1] == "dump":
        dump(Path(sys.argv[2]))
    else:
        decode(Path(sys.argv[2]))
