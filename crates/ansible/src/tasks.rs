//! How many tasks a playbook will start, counted from its files without running Ansible: a
//! job's expected total when no earlier run of the same kind says better (see
//! `slipway_domain::progress`). Counts what emits a `playbook_on_task_start` event: every task
//! of `pre_tasks`, the roles' `tasks/main.yml`, `tasks` and `post_tasks`; a play's fact
//! gathering unless `gather_facts` is off; a block's `block` and `always` (its `rescue` runs
//! only on failure); the tasks of a static `import_tasks`, `import_role` and
//! `import_playbook`, and an `include_*` task itself plus its file when the name is literal.
//! Conditions and loops are not evaluated (a skipped task still starts), so the count is an
//! estimate: the percentage built on it is capped below 100 until the job ends.

use std::fs;
use std::path::Path;

use serde_json::Value;

/// Deeper imports than this are not followed (a cycle, or a playbook too clever to count).
const MAX_DEPTH: usize = 8;

/// The tasks `playbook` (under `project`) will start; `None` when it cannot be read.
pub fn count_playbook(project: &Path, playbook: &str) -> Option<u32> {
    let path = project.join(playbook);
    let plays = read_yaml(&path)?;
    Some(Counter { project }.plays(&plays, dir_of(&path), 0))
}

struct Counter<'a> {
    project: &'a Path,
}

impl Counter<'_> {
    fn plays(&self, plays: &Value, dir: &Path, depth: usize) -> u32 {
        let Some(plays) = plays.as_array() else { return 0 };
        plays.iter().map(|play| self.play(play, dir, depth)).sum()
    }

    fn play(&self, play: &Value, dir: &Path, depth: usize) -> u32 {
        if let Some(file) = first_literal(play, &["import_playbook", "ansible.builtin.import_playbook"]) {
            return self.file(dir, file, depth, |c, v, d, depth| c.plays(v, d, depth));
        }
        let gathers = !play.get("gather_facts").is_some_and(is_off);
        let roles: u32 = play
            .get("roles")
            .and_then(Value::as_array)
            .map(|roles| roles.iter().filter_map(role_name).map(|r| self.role(r, depth)).sum())
            .unwrap_or(0);
        let lists: u32 = ["pre_tasks", "tasks", "post_tasks"]
            .iter()
            .filter_map(|k| play.get(*k))
            .map(|t| self.tasks(t, dir, depth))
            .sum();
        u32::from(gathers) + roles + lists
    }

    fn tasks(&self, tasks: &Value, dir: &Path, depth: usize) -> u32 {
        let Some(tasks) = tasks.as_array() else { return 0 };
        tasks.iter().map(|task| self.task(task, dir, depth)).sum()
    }

    fn task(&self, task: &Value, dir: &Path, depth: usize) -> u32 {
        if let Some(block) = task.get("block") {
            return self.tasks(block, dir, depth) + task.get("always").map_or(0, |a| self.tasks(a, dir, depth));
        }
        let count_file = |c: &Self, v: &Value, d: &Path, depth: usize| c.tasks(v, d, depth);
        if let Some(file) = first_literal(task, &["import_tasks", "ansible.builtin.import_tasks"]) {
            return self.file(dir, file, depth, count_file);
        }
        if let Some(file) = first_literal(task, &["include_tasks", "ansible.builtin.include_tasks"]) {
            return 1 + self.file(dir, file, depth, count_file);
        }
        for (key, included) in [
            ("import_role", 0),
            ("ansible.builtin.import_role", 0),
            ("include_role", 1),
            ("ansible.builtin.include_role", 1),
        ] {
            if let Some(role) = task.get(key).and_then(|r| r.get("name")).and_then(Value::as_str) {
                return included + self.role(role, depth);
            }
        }
        1
    }

    fn role(&self, role: &str, depth: usize) -> u32 {
        if is_templated(role) {
            return 0;
        }
        let dir = self.project.join("roles").join(role).join("tasks");
        ["main.yml", "main.yaml"].iter().map(|main| dir.join(main)).find(|p| p.is_file()).map_or(0, |main| {
            self.file(&dir, main.to_str().unwrap_or_default(), depth, |c, v, d, depth| c.tasks(v, d, depth))
        })
    }

    /// Counts the YAML file `name` (relative to `dir`, else to the project) with `count`.
    fn file(&self, dir: &Path, name: &str, depth: usize, count: impl Fn(&Self, &Value, &Path, usize) -> u32) -> u32 {
        if depth >= MAX_DEPTH || is_templated(name) {
            return 0;
        }
        let path = [dir.join(name), self.project.join(name)].into_iter().find(|p| p.is_file());
        let Some((path, value)) = path.and_then(|p| read_yaml(&p).map(|v| (p, v))) else { return 0 };
        count(self, &value, dir_of(&path), depth + 1)
    }
}

fn read_yaml(path: &Path) -> Option<Value> {
    serde_yaml_ng::from_str(&fs::read_to_string(path).ok()?).ok()
}

fn dir_of(path: &Path) -> &Path {
    path.parent().unwrap_or(Path::new("."))
}

/// The file a task or play names under the first of `keys` it has (`key: file` or
/// `key: {file: …}`), when it is literal text.
fn first_literal<'a>(item: &'a Value, keys: &[&str]) -> Option<&'a str> {
    keys.iter().find_map(|k| {
        let v = item.get(*k)?;
        v.as_str().or_else(|| v.get("file").and_then(Value::as_str))
    })
}

fn role_name(role: &Value) -> Option<&str> {
    role.as_str().or_else(|| role.get("role").or_else(|| role.get("name")).and_then(Value::as_str))
}

fn is_templated(name: &str) -> bool {
    name.contains("{{")
}

/// Ansible's false words for `gather_facts`.
fn is_off(v: &Value) -> bool {
    match v {
        Value::Bool(b) => !b,
        Value::String(s) => matches!(s.to_ascii_lowercase().as_str(), "no" | "false" | "off" | "n" | "0"),
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write(dir: &Path, name: &str, text: &str) {
        let path = dir.join(name);
        fs::create_dir_all(path.parent().unwrap()).unwrap();
        fs::write(path, text).unwrap();
    }

    #[test]
    fn counts_what_starts_a_task() {
        let d = tempfile::tempdir().unwrap();
        write(d.path(), "tasks/shared.yml", "- name: a\n  debug: {}\n- name: b\n  debug: {}\n");
        write(d.path(), "roles/web/tasks/main.yml", "- debug: {}\n- debug: {}\n- debug: {}\n");
        write(
            d.path(),
            "site.yml",
            "- hosts: all\n  roles: [web]\n  pre_tasks:\n    - debug: {}\n  tasks:\n    - import_tasks: tasks/shared.yml\n    \
             - ansible.builtin.include_tasks: tasks/shared.yml\n    - block:\n        - debug: {}\n      rescue:\n        - debug: {}\n      \
             always:\n        - debug: {}\n    - include_tasks: \"{{ dynamic }}.yml\"\n- hosts: all\n  gather_facts: no\n  tasks:\n    \
             - include_role: {name: web}\n",
        );
        // Play 1: facts 1 + role 3 + pre 1 + import 2 + include 1+2 + block 1 + always 1 + dynamic include 1.
        // Play 2: include_role 1 + 3.
        assert_eq!(count_playbook(d.path(), "site.yml"), Some(13 + 4));
    }

    #[test]
    fn the_example_create_playbooks_count_their_imports() {
        let project = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/playbooks");
        assert_eq!(count_playbook(&project, "slipway-create-cluster.yml"), Some(7));
    }

    #[test]
    fn unreadable_and_cyclic_playbooks() {
        let d = tempfile::tempdir().unwrap();
        assert_eq!(count_playbook(d.path(), "missing.yml"), None);
        write(d.path(), "loop.yml", "- import_playbook: loop.yml\n");
        assert_eq!(count_playbook(d.path(), "loop.yml"), Some(0));
        write(d.path(), "bad.yml", "- hosts: [\n");
        assert_eq!(count_playbook(d.path(), "bad.yml"), None);
    }
}
