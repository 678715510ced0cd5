"""Drives Slipway with Azure's generic management client, `azure-mgmt-resource`'s
ResourceManagementClient, as a team that automates ARM would point it at Slipway: a resource
created, checked, read, patched, listed and deleted by id; resource groups created, read,
tagged, listed by tag, checked and deleted with what they hold; providers read and listed;
subscriptions listed; and errors surfacing as the SDK's typed exceptions with ARM codes.
Each call uses the api-version the SDK was generated for on ARM's own paths.

Usage: python resource_sdk.py BASE_URL SUBSCRIPTION TYPE_API_VERSION
Prints one JSON line per call; exits non-zero on the first unexpected outcome.
"""
import json
import sys
import uuid

from azure.core.credentials import AccessToken
from azure.core.exceptions import HttpResponseError, ResourceNotFoundError
from azure.core.pipeline.policies import SansIOHTTPPolicy
from azure.mgmt.resource.resources import ResourceManagementClient
from azure.mgmt.resource.resources.models import (
    GenericResource,
    ResourceGroup,
    ResourceGroupPatchable,
    Tags,
    TagsPatchResource,
    TagsResource,
)
from azure.mgmt.subscription import SubscriptionClient

base, sub, type_api = sys.argv[1], sys.argv[2], sys.argv[3]


class NoToken:
    """The server runs without authentication: the SDK needs a credential all the same."""

    def get_token(self, *scopes, **kwargs):
        return AccessToken("unused", 2**31)


client = ResourceManagementClient(
    NoToken(),
    sub,
    base_url=base,
    # Bearer tokens over plain HTTP are refused by azure-core; none is needed here.
    authentication_policy=SansIOHTTPPolicy(),
    polling_interval=0.1,
)
arm_api = client._config.api_version


def report(call, **kw):
    print(json.dumps({"call": call, **kw}), flush=True)


def expect(cond, msg):
    if not cond:
        print(f"FAILED: {msg}", file=sys.stderr, flush=True)
        sys.exit(1)


group = f"sdk-{uuid.uuid4().hex[:8]}"
name = "vnet1"
vnet = f"/subscriptions/{sub}/resourceGroups/{group}/providers/Slipway.Example/virtualNetworks/{name}"
missing = vnet + "-none"

made = client.resource_groups.create_or_update(group, ResourceGroup(location="local", tags={"team": "sdk"}))
expect(made.name == group and made.properties.provisioning_state == "Succeeded", f"group: {made}")
report("resource_groups.create_or_update", state=made.properties.provisioning_state)
patched = client.resource_groups.update(group, ResourceGroupPatchable(tags={"team": "sdk", "stage": "two"}))
expect(patched.tags == {"team": "sdk", "stage": "two"}, f"group tags: {patched.tags}")
report("resource_groups.update", tags=patched.tags)
tagged = [g.name for g in client.resource_groups.list(filter="tagName eq 'stage' and tagValue eq 'two'")]
expect(tagged == [group], f"groups by tag: {tagged}")
report("resource_groups.list (tag filter)", count=len(tagged))
try:
    client.resource_groups.get(group + "-none")
    expect(False, "GET of a missing group did not raise")
except ResourceNotFoundError as e:
    expect(e.error.code == "ResourceGroupNotFound", f"code {e.error.code}")
    report("resource_groups.get (missing)", code=e.error.code)

body = GenericResource(location="local", tags={"env": "sdk"}, properties={"addressSpace": "10.7.0.0/16"})
created = client.resources.begin_create_or_update_by_id(vnet, body, api_version=type_api).result(timeout=120)
expect(created.properties["provisioningState"] == "Succeeded", f"create: {created}")
report("resources.begin_create_or_update_by_id", state=created.properties["provisioningState"])

expect(client.resources.check_existence_by_id(vnet, api_version=type_api) is True, "HEAD of the created resource")
expect(client.resources.check_existence_by_id(missing, api_version=type_api) is False, "HEAD of a missing resource")
report("resources.check_existence_by_id", exists=True, missing=False)

got = client.resources.get_by_id(vnet, api_version=type_api)
expect(got.id.lower() == vnet.lower() and got.tags == {"env": "sdk"}, f"get: {got}")
report("resources.get_by_id", name=got.name)

try:
    client.resources.get_by_id(missing, api_version=type_api)
    expect(False, "GET of a missing resource did not raise")
except ResourceNotFoundError as e:
    expect(e.error.code == "ResourceNotFound", f"code {e.error.code}")
    report("resources.get_by_id (missing)", code=e.error.code)

try:
    client.resources.get_by_id(vnet, api_version="not-a-version")
    expect(False, "a bad api-version did not raise")
except HttpResponseError as e:
    expect(e.status_code == 400 and e.error.code == "InvalidApiVersionParameter", f"{e.status_code} {e.error}")
    report("resources.get_by_id (bad api-version)", code=e.error.code)

in_group = [r.id.lower() for r in client.resources.list_by_resource_group(group)]
expect(in_group == [vnet.lower()], f"list_by_resource_group: {in_group}")
report("resources.list_by_resource_group", count=len(in_group))

by_type = [r.id.lower() for r in client.resources.list(filter="resourceType eq 'Slipway.Example/virtualNetworks'")]
expect(vnet.lower() in by_type, f"list by type: {by_type}")
by_tag = [r.id.lower() for r in client.resources.list(filter="tagName eq 'env' and tagValue eq 'sdk'")]
expect(by_tag == [vnet.lower()], f"list by tag: {by_tag}")
report("resources.list", by_type=len(by_type), by_tag=len(by_tag))

rg = client.resource_groups.get(group)
expect(rg.name == group and rg.type == "Microsoft.Resources/resourceGroups", f"group: {rg}")
report("resource_groups.get", name=rg.name)
groups = [g.name for g in client.resource_groups.list()]
expect(group in groups, f"groups: {groups}")
report("resource_groups.list", has_group=True)
expect(client.resource_groups.check_existence(group) is True, "HEAD of the group")
expect(client.resource_groups.check_existence(group + "-none") is False, "HEAD of a missing group")
report("resource_groups.check_existence", exists=True, missing=False)

provider = client.providers.get("Slipway.Example")
types = {t.resource_type for t in provider.resource_types}
expect(provider.registration_state == "Registered" and "virtualNetworks" in types, f"provider: {provider}")
report("providers.get", namespace=provider.namespace)
namespaces = [p.namespace for p in client.providers.list()]
expect("Slipway.Example" in namespaces, f"providers: {namespaces}")
report("providers.list", namespaces=namespaces)
registered = client.providers.register("Slipway.Example")
expect(registered.registration_state == "Registered", f"register: {registered}")
report("providers.register", state=registered.registration_state)
try:
    client.providers.unregister("Slipway.Example")
    expect(False, "unregister did not raise")
except HttpResponseError as e:
    expect(e.status_code == 409 and e.error.code == "ProviderUnregistrationNotSupported", f"{e.status_code} {e.error}")
    report("providers.unregister", code=e.error.code)

# Tags at the resource's scope and the group's: written at once, no job.
for scope in (vnet, f"/subscriptions/{sub}/resourceGroups/{group}"):
    client.tags.begin_create_or_update_at_scope(scope, TagsResource(properties=Tags(tags={"owner": "a"}))).result()
    merge = TagsPatchResource(operation="Merge", properties=Tags(tags={"cost": "1"}))
    merged = client.tags.begin_update_at_scope(scope, merge).result()
    expect(merged.properties.tags == {"owner": "a", "cost": "1"}, f"merged tags at {scope}: {merged}")
    drop = TagsPatchResource(operation="Delete", properties=Tags(tags={"owner": ""}))
    client.tags.begin_update_at_scope(scope, drop).result()
    expect(client.tags.get_at_scope(scope).properties.tags == {"cost": "1"}, f"tags after a Delete at {scope}")
    client.tags.begin_delete_at_scope(scope).result()
    expect(client.tags.get_at_scope(scope).properties.tags == {}, f"tags after a DELETE at {scope}")
report("tags.begin_create_or_update_at_scope, begin_update_at_scope, get_at_scope, begin_delete_at_scope", scopes=2)

update = GenericResource(tags={"env": "sdk", "patched": "yes"})
updated = client.resources.begin_update_by_id(vnet, update, api_version=type_api).result(timeout=120)
expect(updated.tags == {"env": "sdk", "patched": "yes"}, f"patch: {updated.tags}")
report("resources.begin_update_by_id", tags=updated.tags)

client.resources.begin_delete_by_id(vnet, api_version=type_api).result(timeout=120)
expect(client.resources.check_existence_by_id(vnet, api_version=type_api) is False, "HEAD after the delete")
report("resources.begin_delete_by_id", exists=False)

subscriptions = SubscriptionClient(NoToken(), base_url=base, authentication_policy=SansIOHTTPPolicy())
listed = [s.subscription_id for s in subscriptions.subscriptions.list()]
report("subscriptions.list", count=len(listed))
one = subscriptions.subscriptions.get(sub)
# Its state is the registry's (`Registered`, …): the SDK reads it as an open enum.
expect(one.subscription_id.lower() == sub.lower() and one.state == "Registered", f"subscription: {one}")
report("subscriptions.get", state=one.state)

# A resource addressed by its parts rather than its id: the same paths.
parts = dict(
    resource_group_name=group,
    resource_provider_namespace="Slipway.Example",
    parent_resource_path="",
    resource_type="virtualNetworks",
    resource_name="byparts",
    api_version=type_api,
)
body = GenericResource(location="local", properties={"addressSpace": "10.30.0.0/16"})
made = client.resources.begin_create_or_update(parameters=body, **parts).result(timeout=120)
expect(made.properties["provisioningState"] == "Succeeded", f"create by parts: {made}")
expect(client.resources.check_existence(**parts) is True, "HEAD by parts")
expect(client.resources.get(**parts).name == "byparts", "GET by parts")
changed = client.resources.begin_update(parameters=GenericResource(tags={"by": "parts"}), **parts).result(timeout=120)
expect(changed.tags == {"by": "parts"}, f"PATCH by parts: {changed.tags}")
client.resources.begin_delete(**parts).result(timeout=120)
expect(client.resources.check_existence(**parts) is False, "HEAD by parts after the delete")
report("resources.begin_create_or_update, check_existence, get, begin_update, begin_delete", by="parts")

tenant_provider = client.providers.get_at_tenant_scope("Slipway.Example")
expect(tenant_provider.namespace == "Slipway.Example", f"tenant-scope provider: {tenant_provider}")
at_tenant = [p.namespace for p in client.providers.list_at_tenant_scope()]
expect("Slipway.Example" in at_tenant, f"tenant-scope providers: {at_tenant}")
report("providers.get_at_tenant_scope, list_at_tenant_scope", namespaces=at_tenant)


def not_served(call, fn):
    """A call Slipway deliberately does not serve: it must fail as ARM fails, with a code."""
    try:
        fn()
    except HttpResponseError as e:
        expect(e.status_code in (404, 405) and e.error is not None and e.error.code, f"{call}: {e.status_code} {e.error}")
        report(call, status=e.status_code, code=e.error.code)
        return
    expect(False, f"{call} answered as if served")


not_served("resource_groups.begin_export_template", lambda: client.resource_groups.begin_export_template(
    group, {"resources": ["*"]}).result(timeout=30))
not_served("resources.begin_move_resources", lambda: client.resources.begin_move_resources(
    group, {"resources": [vnet], "targetResourceGroup": f"/subscriptions/{sub}/resourceGroups/elsewhere"}).result(timeout=30))
not_served("resources.begin_validate_move_resources", lambda: client.resources.begin_validate_move_resources(
    group, {"resources": [vnet], "targetResourceGroup": f"/subscriptions/{sub}/resourceGroups/elsewhere"}).result(timeout=30))
not_served("tags.list", lambda: list(client.tags.list()))
not_served("tags.create_or_update", lambda: client.tags.create_or_update("costCenter"))
not_served("providers.provider_permissions", lambda: client.providers.provider_permissions("Slipway.Example"))
not_served("provider_resource_types.list", lambda: client.provider_resource_types.list("Slipway.Example"))
not_served("providers.register_at_management_group_scope",
           lambda: client.providers.register_at_management_group_scope("Slipway.Example", "mg1"))

# The group goes with what it holds, each resource through its own delete.
held = [f"/subscriptions/{sub}/resourceGroups/{group}/providers/Slipway.Example/virtualNetworks/held{i}" for i in (1, 2)]
for i, r in enumerate(held):
    body = GenericResource(location="local", properties={"addressSpace": f"10.{20 + i}.0.0/16"})
    client.resources.begin_create_or_update_by_id(r, body, api_version=type_api).result(timeout=120)
client.resource_groups.begin_delete(group).result(timeout=120)
expect(client.resource_groups.check_existence(group) is False, "HEAD of the deleted group")
for r in held:
    expect(client.resources.check_existence_by_id(r, api_version=type_api) is False, f"{r} after its group's delete")
report("resource_groups.begin_delete", exists=False, deleted=len(held))

report("done", api_version=arm_api)
