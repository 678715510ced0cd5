"""Reads Slipway's activity log with Azure's own client, `azure-mgmt-monitor`'s
MonitorManagementClient, as a team would point its existing Activity Log tooling at it:
`activity_logs.list` with a time-range and resource-group filter, every page followed, each
EventData field the SDK models read; a correlation-id filter; and a malformed filter
surfacing as the SDK's typed error with ARM's code.

Usage: python activity_sdk.py BASE_URL SUBSCRIPTION CORRELATION_ID
Prints one JSON line per call; exits non-zero on the first unexpected outcome.
"""
import datetime
import json
import sys

from azure.core.credentials import AccessToken
from azure.core.exceptions import HttpResponseError
from azure.core.pipeline.policies import SansIOHTTPPolicy
from azure.mgmt.monitor import MonitorManagementClient

base, sub, correlation = sys.argv[1], sys.argv[2], sys.argv[3]


class NoToken:
    """The server runs without authentication: the SDK needs a credential all the same."""

    def get_token(self, *scopes, **kwargs):
        return AccessToken("unused", 2**31)


client = MonitorManagementClient(NoToken(), sub, base_url=base, authentication_policy=SansIOHTTPPolicy())


def report(call, **kw):
    print(json.dumps({"call": call, **kw}), flush=True)


def expect(cond, msg):
    if not cond:
        print(f"FAILED: {msg}", file=sys.stderr, flush=True)
        sys.exit(1)


since = (datetime.datetime.now(datetime.timezone.utc) - datetime.timedelta(hours=1)).strftime("%Y-%m-%dT%H:%M:%SZ")
events = list(client.activity_logs.list(filter=f"eventTimestamp ge '{since}' and resourceGroupName eq 'rg1'"))
expect(len(events) >= 3, f"at least the create, the update and the refusal: {len(events)}")
for e in events:
    expect(e.operation_name.value.endswith(("/write", "/delete", "/action")), f"operation name {e.operation_name.value}")
    expect(e.resource_group_name.lower() == "rg1", f"group {e.resource_group_name}")
    expect(e.status.value in ("Accepted", "Succeeded", "Failed"), f"status {e.status.value}")
    expect(e.event_timestamp is not None and e.caller, "time and caller")
    expect(e.http_request is not None and e.http_request.method in ("PUT", "PATCH", "DELETE", "POST"), "http request")
report(
    "activity_logs.list (time range, group)",
    count=len(events),
    operations=sorted({e.operation_name.value for e in events}),
    statuses=sorted({e.status.value for e in events}),
)

mine = list(client.activity_logs.list(filter=f"eventTimestamp ge '{since}' and correlationId eq '{correlation}'"))
expect(len(mine) == 1 and mine[0].correlation_id == correlation, f"one entry of {correlation}: {len(mine)}")
expect(mine[0].sub_status.value == "Created", f"the create: {mine[0].sub_status.value}")
report("activity_logs.list (correlation id)", status=mine[0].status.value, operation_id=mine[0].operation_id)

try:
    list(client.activity_logs.list(filter="level eq 'Error'"))
    expect(False, "a malformed filter was accepted")
except HttpResponseError as e:
    expect(e.status_code == 400 and e.error.code == "InvalidFilter", f"typed 400: {e.status_code} {e.error}")
    report("activity_logs.list (malformed filter)", status=e.status_code, code=e.error.code)
