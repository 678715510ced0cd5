"""Drives Slipway with the real azure-mgmt-core ARMPolling client: a resource's PUT, PATCH,
failure and DELETE, then a cluster with two node pools through create, an action and a
cascading delete, and a preflight failure's details.

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

def get_status(path):
    return client.send_request(HttpRequest("GET", client.format_url(f"{path}?api-version={api}"))).status_code


cluster = rid("clusters", f"c-{name}")
pools = [f"{cluster}/nodePools/pool{i}" for i in (1, 2)]

# Create: the pools are accepted while the cluster provisions; their jobs wait for it.
pollers = [begin("PUT", cluster, {"location": "local", "properties": {"version": "4.17"}}, "azure-async-operation")]
pollers += [
    begin("PUT", p, {"location": "local", "properties": {"replicas": 2 + i}}, "azure-async-operation")
    for i, p in enumerate(pools)
]
results = [p.result(timeout=120) for p in pollers]
expect(all(r["properties"]["provisioningState"] == "Succeeded" for r in results), f"create results: {results}")
expect(results[0]["properties"]["currentVersion"] == "4.17", f"cluster outputs: {results[0]}")
expect([r["properties"]["readyReplicas"] for r in results[1:]] == [2, 3], f"pool outputs: {results[1:]}")
report("cluster-create", pools=len(results) - 1)

# An action: 202 without a body; the Location answers with the resource once it is done.
result = begin("POST", f"{cluster}/upgrade", {"version": "4.18"}, "location").result(timeout=120)
expect(result["properties"]["currentVersion"] == "4.18", f"upgrade result: {result}")
expect(result["properties"]["version"] == "4.17", f"the spec is untouched: {result}")
report("cluster-action", currentVersion=result["properties"]["currentVersion"])

# Cascading delete: the pools go first, then the cluster. The poller follows the cluster's
# operation, whose status names each pool's own delete operation.
result = begin("DELETE", cluster, None, "azure-async-operation").result(timeout=120)
expect(result["status"] == "Succeeded", f"cascade result: {result}")
children = sorted(c["resourceId"] for c in result["properties"]["childOperations"])
expect(children == pools, f"child operations: {children}")
for c in result["properties"]["childOperations"]:
    child = client.send_request(HttpRequest("GET", client.format_url(f"{c['id']}?api-version={api}"))).json()
    expect(child["status"] == "Succeeded", f"child operation: {child}")
codes = [get_status(p) for p in [cluster, *pools]]
expect(codes == [404, 404, 404], f"GETs after the cascade: {codes}")
report("cluster-cascade", deleted=len(codes))

# A failed preflight check raises with its own detail.
try:
    begin("PUT", rid("clusters", f"c-{name}-old"), {"location": "local", "properties": {"version": "4.12"}}, "azure-async-operation").result(timeout=120)
    expect(False, "a failing preflight did not raise")
except HttpResponseError as e:
    expect(e.error is not None and e.error.code == "PreflightValidationFailed", f"error {e.error}")
    details = [(d.code, d.target) for d in e.error.details]
    expect(details == [("PreflightCheckFailed", "version")], f"details {details}")
    report("cluster-preflight-failure", code=e.error.code, details=len(details))
print("arm_poller: all scenarios passed", flush=True)
