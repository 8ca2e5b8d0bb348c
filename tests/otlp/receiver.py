"""The OTLP receiver of tests/otlp.rs, built from the official OpenTelemetry
Python classes (opentelemetry-proto) and gRPC (grpcio), from PyPI
(scripts/fetch-otlp-receiver.sh).

    receiver.py serve DIR   listens on 127.0.0.1 (a free port, printed as
                            `listening PORT`) and keeps each profiles
                            export it gets as DIR/NNNN.bin, as sent
    receiver.py decode DIR  decodes them with the official classes and
                            prints one JSON line per sample:
                            {"profile": sample type, "unit": ...,
                             "resource": {attributes}, "value": N,
                             "frames": [function names, leaf first],
                             "mappings": [mapping file names, leaf first],
                             "build_ids": [their GNU build IDs, hex],
                             "types": [profile.frame.type of each],
                             "attributes": {sample attributes}}
"""

import json
import sys
import threading
from concurrent import futures
from pathlib import Path

import grpc
from opentelemetry.proto.collector.profiles.v1development import (
    profiles_service_pb2 as service,
    profiles_service_pb2_grpc as service_grpc,
)


class Receiver(service_grpc.ProfilesServiceServicer):
    def __init__(self, out):
        self.out = out
        self.n = 0
        self.lock = threading.Lock()

    def Export(self, request, context):
        with self.lock:
            self.n += 1
            (self.out / f"{self.n:04}.bin").write_bytes(request.SerializeToString())
        return service.ExportProfilesServiceResponse()


def serve(out):
    out.mkdir(parents=True, exist_ok=True)
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
    service_grpc.add_ProfilesServiceServicer_to_server(Receiver(out), server)
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    print(f"listening {port}", flush=True)
    server.wait_for_termination()


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
                            "attributes": dict(attr(i) for i in sample.attribute_indices),
                        }))


if __name__ == "__main__":
    {"serve": serve, "decode": decode}[sys.argv[1]](Path(sys.argv[2]))
