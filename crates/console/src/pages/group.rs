//! A resource group's own forms: make one (a `PUT` with its location), set its tags (ARM's
//! tags at its scope: at once, no job), and delete one with everything in it (a `DELETE`,
//! confirmed in the page with the list of what goes). The group's page itself is `lists`'.

use std::sync::Arc;

use axum::Form;
use axum::extract::State;
use axum::http::{HeaderMap, Method};
use serde::Deserialize;
use serde_json::{Value, json};

use super::bad_request;
use super::resource::after_change;
use crate::Console;
use crate::api::{ArmProblem, uri};
use crate::session::{Visit, forged, form_is_ours};
use axum::response::Response;

#[derive(Debug, Deserialize)]
pub(crate) struct GroupForm {
    #[serde(default)]
    csrf: String,
    #[serde(default)]
    subscription: String,
    #[serde(default)]
    group: String,
    #[serde(default)]
    location: String,
    /// One `name=value` per line.
    #[serde(default)]
    tags: String,
}

impl GroupForm {
    /// The group's path, when the form is the visitor's own and names a group; else the
    /// page that says why not.
    fn checked(&self, console: &Console, visit: &Visit, headers: &HeaderMap) -> Result<String, Box<Response>> {
        if !form_is_ours(visit, headers, &self.csrf) {
            return Err(Box::new(forged(console, visit)));
        }
        self.path().map_err(|problem| Box::new(bad_request(console, visit, problem)))
    }

    /// The group's path, or what is missing from the form.
    fn path(&self) -> Result<String, ArmProblem> {
        if self.subscription.is_empty() || self.group.is_empty() {
            return Err(ArmProblem::new("InvalidRequest", "Name the subscription and the resource group."));
        }
        let (sub, group) = (crate::api::segment(&self.subscription), crate::api::segment(&self.group));
        Ok(format!("/subscriptions/{sub}/resourceGroups/{group}"))
    }
}

/// `POST /ui/group/create`: the group made (or, if it exists in that location, kept), then
/// its page.
pub(crate) async fn create(
    State(console): State<Arc<Console>>,
    headers: HeaderMap,
    visit: Visit,
    Form(form): Form<GroupForm>,
) -> Response {
    let path = match form.checked(&console, &visit, &headers) {
        Ok(path) => path,
        Err(refused) => return *refused,
    };
    let body = json!({"location": form.location});
    send(&console, &visit, Method::PUT, &path, Some(&body), &uri(&format!("/ui{path}"), &[])).await
}

/// `POST /ui/group/delete`: the group's delete, then its operation.
pub(crate) async fn delete(
    State(console): State<Arc<Console>>,
    headers: HeaderMap,
    visit: Visit,
    Form(form): Form<GroupForm>,
) -> Response {
    let path = match form.checked(&console, &visit, &headers) {
        Ok(path) => path,
        Err(refused) => return *refused,
    };
    let back = uri(&format!("/ui/subscriptions/{}", crate::api::segment(&form.subscription)), &[]);
    send(&console, &visit, Method::DELETE, &path, None, &back).await
}

/// `POST /ui/group/tags`: the group's tags become the form's, then its page.
pub(crate) async fn tags(
    State(console): State<Arc<Console>>,
    headers: HeaderMap,
    visit: Visit,
    Form(form): Form<GroupForm>,
) -> Response {
    let path = match form.checked(&console, &visit, &headers) {
        Ok(path) => path,
        Err(refused) => return *refused,
    };
    let tags = match crate::form::tags(&form.tags) {
        Ok(tags) => tags,
        Err(why) => return bad_request(&console, &visit, ArmProblem::new("InvalidTag", why)),
    };
    let body = json!({"properties": {"tags": tags}});
    let at = format!("{path}/providers/Microsoft.Resources/tags/default");
    send(&console, &visit, Method::PUT, &at, Some(&body), &uri(&format!("/ui{path}"), &[])).await
}

/// One API request on the platform api-version as the visitor, then where it leads: its
/// operation, or `back`.
async fn send(
    console: &Console,
    visit: &Visit,
    method: Method,
    target: &str,
    body: Option<&Value>,
    back: &str,
) -> Response {
    let query = [("api-version", crate::PLATFORM_API_VERSION)];
    let answer = console.api.call(&visit.visitor, method, target, &query, body).await;
    after_change(console, visit, answer, back)
}
