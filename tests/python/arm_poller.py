"""Drives Slipway with the real azure-mgmt-core ARMPolling client.

Usage: python arm_poller.py BASE_URL SUBSCRIPTION API_VERSION
Prints one JSON line per scenario; exits non-zero on the first unexpected outcome.
"""
import json
import sys
import uuid

from azure.core import PipelineClient
from azure.core.exceptions import HttpResponseError
from azure.core.pipeline.policies import HeadersPolicy, RequestIdPolicy, RetryPolicy
from azure.core.polling import LROPoller
from azure.core.rest import HttpRequest
from azure.mgmt.core.polling.arm_polling import ARMPolling

base, sub, api = sys.argv[1], sys.argv[2], sys.argv[3]
client = PipelineClient(
    base_url=base,
    policies=[RequestIdPolicy(), HeadersPolicy(), RetryPolicy(retry_total=3, retry_backoff_factor=0.1)],
)


def rid(kind, name):
    return f"/subscriptions/{sub}/resourceGroups/pyrg/providers/Slipway.Example/{kind}/{name}"


def begin(method, path, body, final_state_via):
    url = client.format_url(f"{path}?api-version={api}")
    init = client.send_request(HttpRequest(method, url, json=body), _return_pipeline_response=True)

    def deser(pr):
        text = pr.http_response.text()
        return json.loads(text) if text else None

    return LROPoller(client, init, deser, ARMPolling(0.1, lro_options={"final-state-via": final_state_via}))


def report(name, **kw):
    print(json.dumps({"scenario": name, **kw}), flush=True)


def expect(cond, msg):
    if not cond:
        print(f"FAILED: {msg}", file=sys.stderr, flush=True)
        sys.exit(1)


name = f"py-{uuid.uuid4().hex[:8]}"
vnet = rid("virtualNetworks", name)

# PUT: the poller follows Azure-AsyncOperation, then GETs the resource.
result = begin("PUT", vnet, {"location": "local", "properties": {"addressSpace": "10.5.0.0/16"}}, "azure-async-operation").result(timeout=120)
expect(result["properties"]["provisioningState"] == "Succeeded", f"PUT result: {result}")
expect(result["properties"]["addressSpace"] == "10.5.0.0/16", f"PUT result: {result}")
report("put", state=result["properties"]["provisioningState"])

# PATCH: final GET via Location.
result = begin("PATCH", vnet, {"tags": {"team": "py"}}, "location").result(timeout=120)
expect(result["tags"] == {"team": "py"}, f"PATCH result: {result}")
report("patch", tags=result["tags"])

# A failing PUT raises with the operation's error.
bad = rid("virtualNetworks", name + "-bad")
try:
    begin("PUT", bad, {"location": "local", "properties": {"addressSpace": "10.6.0.0/16", "simulateFailure": True}}, "azure-async-operation").result(timeout=120)
    expect(False, "failing PUT did not raise")
except HttpResponseError as e:
    expect(e.status_code == 200, f"status {e.status_code}")
    expect(e.error is not None and e.error.code == "ProvisioningFailed", f"error {e.error}")
    expect("simulated failure" in e.error.message, f"message {e.error.message}")
    report("failing-put", code=e.error.code)

# DELETE: polled to Succeeded, result None; the resource is gone.
result = begin("DELETE", vnet, None, "location").result(timeout=120)
expect(result is None, f"DELETE result: {result}")
gone = client.send_request(HttpRequest("GET", client.format_url(f"{vnet}?api-version={api}")))
expect(gone.status_code == 404, f"GET after delete: {gone.status_code}")
report("delete", result=None)

# DELETE of an absent resource: 204, StatusCheckPolling, result None.
result = begin("DELETE", vnet, None, "location").result(timeout=30)
expect(result is None, "absent DELETE")
report("delete-absent", result=None)
print("arm_poller: all scenarios passed", flush=True)
