#!/usr/bin/env python3
# Decodes OTLP/HTTP protobuf request bodies with the official definitions:
#   decode.py PROTO_DIR FILE...   (a file named *metrics* is an
#   ExportMetricsServiceRequest, *logs* an ExportLogsServiceRequest)
# Prints a JSON list of {"file", "request"} (protobuf's JSON mapping).
import json, os, subprocess, sys, tempfile

proto_dir, files = sys.argv[1], sys.argv[2:]
out = tempfile.mkdtemp()
protos = [os.path.relpath(os.path.join(d, f), proto_dir)
          for d, _, fs in os.walk(proto_dir) for f in fs if f.endswith('.proto')]
subprocess.run(['protoc', '-I', proto_dir, '--python_out', out] + protos, check=True)
sys.path.insert(0, out)
from google.protobuf import json_format  # noqa: E402
from opentelemetry.proto.collector.metrics.v1 import metrics_service_pb2  # noqa: E402
from opentelemetry.proto.collector.logs.v1 import logs_service_pb2  # noqa: E402

decoded = []
for f in files:
    msg = (metrics_service_pb2.ExportMetricsServiceRequest() if 'metrics' in os.path.basename(f)
           else logs_service_pb2.ExportLogsServiceRequest())
    with open(f, 'rb') as fh:
        msg.ParseFromString(fh.read())
    decoded.append({'file': f, 'request': json_format.MessageToDict(msg)})
print(json.dumps(decoded))
