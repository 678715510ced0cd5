//! The local Ansible provider against real ansible-runner / ansible-playbook runs.

mod common;

use std::sync::Arc;
use std::time::Duration;

use common::{Fixture, eventually, processes_with_argv, request, sleep_marker, terminal};
use serde_json::json;
use slipway_ansible::AnsibleProvider;
use slipway_domain::{JobId, JobState};
use slipway_provider::{CancelOutcome, Provider, ProviderError};

const RUN_TIMEOUT: Duration = Duration::from_secs(60);

#[tokio::test]
async fn successful_job_sees_its_extra_vars() {
    let fx = Fixture::new();
    fx.playbook(
        "create-virtual-network.yml",
        r#"    - copy:
        dest: "{{ slipway.resource.properties.out }}"
        content: "{{ slipway.resource.properties.x }}|{{ slipway.resource.properties.y }}|{{ slipway_idempotency_key }}|{{ slipway.resource.kind }}|{{ slipway.action }}"
"#,
    );
    let out = fx.work.path().join("result.txt");
    let p = fx.provider();
    let key = "6f1c2e9a-0000-4000-8000-000000000001:1";
    // A directory left by a crash before spawn (no job.json, no artifacts) is replaced.
    let stale = fx.work.path().join("6f1c2e9a-0000-4000-8000-000000000001_1");
    std::fs::create_dir(&stale).unwrap();
    std::fs::write(stale.join("junk"), "x").unwrap();
    let req = request(
        key,
        "VirtualNetwork",
        json!({
            "x": "hello-42",
            // Must arrive as text: Ansible would otherwise run the lookup.
            "y": "{{ lookup('pipe', 'echo pwned') }}",
            "out": out.display().to_string(),
        }),
    );
    assert_eq!(p.find(&req).await.unwrap(), Vec::new());

    let launched = p.launch(&req).await.unwrap();
    assert_eq!(launched.state, JobState::Running);
    assert_eq!(launched.template, "create-virtual-network.yml");
    assert_eq!(launched.handle.job_id, "6f1c2e9a-0000-4000-8000-000000000001_1");
    assert!(!stale.join("junk").exists());

    let st = terminal(&p, &launched.handle, RUN_TIMEOUT).await;
    assert_eq!(st.state, JobState::Succeeded, "{st:?}");
    assert_eq!(st.message, "successful");
    assert_eq!(
        std::fs::read_to_string(&out).unwrap(),
        format!("hello-42|{{{{ lookup('pipe', 'echo pwned') }}}}|{key}|VirtualNetwork|create")
    );
    // Launching again with the same key returns the same job, not a second run.
    let again = p.launch(&req).await.unwrap();
    assert_eq!(again.handle, launched.handle);
    assert_eq!(again.state, JobState::Succeeded);
}

#[tokio::test]
async fn set_stats_outputs_are_reported_with_the_success() {
    let fx = Fixture::new();
    // Other set_stats keys and a per-host call are not outputs; the earlier outputs reach
    // the job as `slipway.resource.outputs`.
    fx.playbook(
        "create-compute-instance.yml",
        r#"    - set_stats:
        data:
          unrelated: 1
          slipway_outputs:
            ipAddress: "10.0.0.{{ 2 + 2 }}"
            previous: "{{ slipway.resource.outputs.hostName }}"
            disks: [{lun: 0}]
        per_host: false
"#,
    );
    let p = fx.provider();
    let mut req = request("outputs:1", "ComputeInstance", json!({}));
    req.outputs = json!({"hostName": "vm1"}).as_object().unwrap().clone();
    let launched = p.launch(&req).await.unwrap();
    let st = terminal(&p, &launched.handle, RUN_TIMEOUT).await;
    assert_eq!(st.state, JobState::Succeeded, "{st:?}");
    let outputs = json!({"ipAddress": "10.0.0.4", "previous": "vm1", "disks": [{"lun": 0}]});
    assert_eq!(st.stats, Some(json!({"unrelated": 1, "slipway_outputs": outputs})), "the whole set_stats data");

    // A playbook that reports nothing has no outputs (the resource keeps its earlier ones).
    fx.playbook("create-subnet.yml", "    - debug: msg=quiet\n");
    let launched = p.launch(&request("outputs:2", "Subnet", json!({}))).await.unwrap();
    let st = terminal(&p, &launched.handle, RUN_TIMEOUT).await;
    assert_eq!((st.state, st.stats), (JobState::Succeeded, None));
}

#[tokio::test]
async fn failed_task_message_is_reported() {
    let fx = Fixture::new();
    fx.playbook("slipway-create-subnet.yml", "    - fail: msg=boom-123\n");
    let p = AnsibleProvider::new(slipway_ansible::AnsibleOptions {
        playbook_prefix: Some("slipway".into()),
        ..fx.options()
    })
    .unwrap();
    let launched = p.launch(&request("fail:1", "Subnet", json!({}))).await.unwrap();
    assert_eq!(launched.template, "slipway-create-subnet.yml");
    let st = terminal(&p, &launched.handle, RUN_TIMEOUT).await;
    assert_eq!(st.state, JobState::Failed, "{st:?}");
    assert_eq!(st.message, "failed");
    assert!(st.error_details.contains("boom-123"), "{st:?}");
    assert!(st.error_details.contains("Task 'fail' failed on localhost"), "{st:?}");
}

#[tokio::test]
async fn a_launch_over_the_limit_starts_when_a_running_job_ends_and_the_end_is_told() {
    let fx = Fixture::new();
    let gate = fx.work.path().join("gate");
    fx.playbook(
        "create-nat-gateway.yml",
        &format!("    - shell: \"while [ ! -e {} ]; do sleep 0.05; done\"\n", gate.display()),
    );
    let p = AnsibleProvider::new(slipway_ansible::AnsibleOptions {
        max_concurrent: 1,
        queue_wait: Duration::from_secs(600),
        ..fx.options()
    })
    .unwrap();
    let (told, mut ends) = tokio::sync::mpsc::unbounded_channel();
    p.on_job_end(Arc::new(move |job: &JobId| {
        let _ = told.send(job.clone());
    }));
    let p = Arc::new(p);
    let first = p.launch(&request("queue:1", "NATGateway", json!({}))).await.unwrap();
    let second = tokio::spawn({
        let p = p.clone();
        async move { p.launch(&request("queue:2", "NATGateway", json!({}))).await }
    });
    tokio::task::yield_now().await;
    assert!(!second.is_finished(), "the second launch got a place while the first job runs");

    std::fs::write(&gate, "").unwrap();
    let second = tokio::time::timeout(RUN_TIMEOUT, second).await.expect("the queued launch").unwrap();
    let second = second.expect("the queued launch started once the first job ended, not turned away");
    assert_ne!(second.handle, first.handle);
    let st = p.status(std::slice::from_ref(&first.handle)).await.remove(0).unwrap();
    assert_eq!(st.state, JobState::Succeeded, "the place was freed by the first job's end: {st:?}");

    // Each runner's exit is told with its job id, and a status read then sees the job ended.
    for launched in [&first, &second] {
        let job = tokio::time::timeout(RUN_TIMEOUT, ends.recv()).await.expect("a job end").unwrap();
        assert_eq!(job, launched.handle.job_id);
        let st = p.status(std::slice::from_ref(&launched.handle)).await.remove(0).unwrap();
        assert_eq!(st.state, JobState::Succeeded, "{st:?}");
    }
    p.shutdown().await;
}

#[tokio::test]
async fn cancel_leaves_no_orphans() {
    let fx = Fixture::new();
    let marker = sleep_marker(1);
    fx.playbook("create-nat-gateway.yml", &format!("    - command: sleep {marker}\n"));
    let p = AnsibleProvider::new(slipway_ansible::AnsibleOptions {
        max_concurrent: 1,
        queue_wait: Duration::ZERO,
        ..fx.options()
    })
    .unwrap();
    let launched = p.launch(&request("cancel:1", "NATGateway", json!({}))).await.unwrap();

    // One job at a time, and no wait for a place: a second launch is turned away at once.
    let busy = p.launch(&request("cancel:2", "NATGateway", json!({}))).await;
    assert!(matches!(busy, Err(ProviderError::RateLimited { .. })), "{busy:?}");

    eventually("the job's sleep to start", RUN_TIMEOUT, async || {
        (!processes_with_argv(&["sleep", &marker]).is_empty()).then_some(())
    })
    .await;
    let st = p.status(std::slice::from_ref(&launched.handle)).await.remove(0).unwrap();
    assert_eq!(st.state, JobState::Running);

    assert_eq!(p.cancel(&launched.handle).await.unwrap(), CancelOutcome::Requested);
    // Idempotent while pending.
    assert_eq!(p.cancel(&launched.handle).await.unwrap(), CancelOutcome::Requested);
    let st = terminal(&p, &launched.handle, Duration::from_secs(20)).await;
    assert_eq!(st.state, JobState::Canceled, "{st:?}");
    eventually("no process of the job to remain", Duration::from_secs(10), async || {
        processes_with_argv(&["sleep", &marker]).is_empty().then_some(())
    })
    .await;
    assert_eq!(p.cancel(&launched.handle).await.unwrap(), CancelOutcome::AlreadyFinished);
    p.shutdown().await;
}

#[tokio::test]
async fn cancel_of_adopted_job_escalates_to_sigkill() {
    let fx = Fixture::new();
    let marker = sleep_marker(3);
    // The shell and its sleep ignore SIGTERM: only the SIGKILL after the grace ends them.
    fx.playbook("create-subnet.yml", &format!("    - shell: \"trap '' TERM; sleep {marker}; true\"\n"));
    let req = request("escalate:1", "Subnet", json!({}));
    // Launch from a runtime that then goes away, like a Slipway that restarted: no reaper
    // and no child handle remain, so only the cancel escalation can clean up.
    let (opts, req2) = (fx.options(), req.clone());
    std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        rt.block_on(async { AnsibleProvider::new(opts).unwrap().launch(&req2).await.unwrap() })
    })
    .join()
    .unwrap();

    let b =
        AnsibleProvider::new(slipway_ansible::AnsibleOptions { cancel_grace: Duration::from_secs(1), ..fx.options() })
            .unwrap();
    eventually("the job's sleep to start", RUN_TIMEOUT, async || {
        (!processes_with_argv(&["sleep", &marker]).is_empty()).then_some(())
    })
    .await;
    let found = b.find(&req).await.unwrap().pop().expect("the job is found");
    assert_eq!(found.state, JobState::Running);
    assert_eq!(b.cancel(&found.handle).await.unwrap(), CancelOutcome::Requested);
    // No status polls here: the escalation alone must leave nothing behind.
    eventually("no process of the job to remain", Duration::from_secs(15), async || {
        processes_with_argv(&["sleep", &marker]).is_empty().then_some(())
    })
    .await;
    b.shutdown().await;
    let st = terminal(&b, &found.handle, Duration::from_secs(10)).await;
    assert_eq!(st.state, JobState::Canceled, "{st:?}");
}

#[tokio::test]
async fn restarted_provider_adopts_running_job() {
    let fx = Fixture::new();
    fx.playbook("create-public-ip-pool.yml", "    - command: sleep 2\n");
    let req = request("adopt:1", "PublicIPPool", json!({}));
    let launched = {
        let a = fx.provider();
        a.launch(&req).await.unwrap()
        // `a` is dropped here, as on a Slipway restart; the runner must keep going.
    };
    let job_json = fx.work.path().join("adopt_1/job.json");
    let pid_before = std::fs::read_to_string(&job_json).unwrap();

    // Also simulate a crash between spawn and writing job.json: B finds the runner in
    // the process table.
    std::fs::remove_file(&job_json).unwrap();
    let b = fx.provider();
    let found = b.find(&req).await.unwrap().pop().expect("the job is found");
    assert_eq!(found.handle, launched.handle);
    assert_eq!(found.state, JobState::Running);
    assert_eq!(found.template, "create-public-ip-pool.yml");
    let rec: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&job_json).unwrap()).unwrap();
    let before: serde_json::Value = serde_json::from_str(&pid_before).unwrap();
    assert_eq!(rec["pid"], before["pid"]);
    assert_eq!(rec["start_time_ticks"], before["start_time_ticks"]);
    // The request is at hand, so the adopted job can be listed with its resource.
    assert_eq!(
        (rec["resource_id"].as_str(), rec["action"].as_str()),
        (Some(req.resource_id.to_string().as_str()), Some("create"))
    );

    let st = terminal(&b, &found.handle, RUN_TIMEOUT).await;
    assert_eq!(st.state, JobState::Succeeded, "{st:?}");
    let found = b.find(&req).await.unwrap().pop().expect("still found");
    assert_eq!(found.state, JobState::Succeeded);

    assert_eq!(b.find(&request("unknown:1", "PublicIPPool", json!({}))).await.unwrap(), Vec::new());
}

#[tokio::test]
async fn a_key_another_process_is_launching_is_neither_launched_nor_reported_absent() {
    let fx = Fixture::new();
    fx.playbook("create-subnet.yml", "    - command: \"true\"\n");
    let req = request("shared:1", "Subnet", json!({}));
    // Another Slipway process on this host sharing the work dir is in the middle of this
    // key's launch (it prepared the directory and has not spawned yet): it holds the lock.
    let locks = fx.work.path().join(".locks");
    std::fs::create_dir_all(&locks).unwrap();
    let other =
        std::fs::OpenOptions::new().create(true).truncate(false).write(true).open(locks.join("shared_1")).unwrap();
    other.lock().unwrap();
    std::fs::create_dir(fx.work.path().join("shared_1")).unwrap();

    let p = fx.provider();
    assert!(matches!(p.find(&req).await, Err(ProviderError::Indeterminate(_))), "absence is not proven");
    assert!(matches!(p.launch(&req).await, Err(ProviderError::Indeterminate(_))), "no second launch");
    assert!(fx.work.path().join("shared_1").exists(), "its directory is left alone");

    // That process died before spawning: the kernel drops its lock, and the key launches once.
    drop(other);
    let launched = p.launch(&req).await.unwrap();
    let st = terminal(&p, &launched.handle, RUN_TIMEOUT).await;
    assert_eq!(st.state, JobState::Succeeded, "{st:?}");
    let again = fx.provider().launch(&req).await.unwrap();
    assert_eq!(again.handle, launched.handle, "a restarted provider returns the same job");
    assert_eq!(fx.provider().find(&req).await.unwrap().len(), 1);
}

#[tokio::test]
async fn job_timeout_fails_and_kills_orphans() {
    let fx = Fixture::new();
    let marker = sleep_marker(2);
    fx.playbook("create-subnet.yml", &format!("    - command: sleep {marker}\n"));
    let p = AnsibleProvider::new(slipway_ansible::AnsibleOptions {
        job_timeout: Some(Duration::from_secs(2)),
        ..fx.options()
    })
    .unwrap();
    let launched = p.launch(&request("timeout:1", "Subnet", json!({}))).await.unwrap();
    let st = terminal(&p, &launched.handle, RUN_TIMEOUT).await;
    assert_eq!(st.state, JobState::Failed, "{st:?}");
    assert!(st.message.contains("timeout"), "{st:?}");
    // Runner's own timeout kill leaks ansible's setsid workers; the provider sweeps them.
    eventually("no process of the job to remain", Duration::from_secs(10), async || {
        processes_with_argv(&["sleep", &marker]).is_empty().then_some(())
    })
    .await;
}

#[tokio::test]
async fn missing_playbook_is_permanent_and_leaves_nothing() {
    let fx = Fixture::new();
    let p = fx.provider();
    let err = p.launch(&request("missing:1", "VirtualNetwork", json!({}))).await.unwrap_err();
    match err {
        ProviderError::Permanent(m) => {
            assert!(m.contains("create-virtual-network.yml"), "{m}");
            assert!(m.contains("is not installed"), "{m}");
            assert!(!m.contains(&fx.playbooks.path().display().to_string()), "no server path for a tenant: {m}");
        }
        other => panic!("expected Permanent, got {other:?}"),
    }
    assert_eq!(std::fs::read_dir(fx.work.path()).unwrap().count(), 0);
}

#[tokio::test]
async fn unknown_job_dir_is_not_found() {
    let fx = Fixture::new();
    let p = fx.provider();
    let handle = slipway_provider::JobHandle { job_id: "nope_1".into(), data: json!({}) };
    let st = p.status(std::slice::from_ref(&handle)).await;
    assert!(matches!(st[0], Err(ProviderError::NotFound(_))), "{st:?}");
    assert!(matches!(p.cancel(&handle).await, Err(ProviderError::NotFound(_))));
    let bad = slipway_provider::JobHandle { job_id: "..".into(), data: json!({}) };
    assert!(matches!(p.status(&[bad]).await[0], Err(ProviderError::Permanent(_))));
}

/// Every directory and file under `dir` (not following links): path and permission bits.
fn modes_under(dir: &std::path::Path, out: &mut Vec<(std::path::PathBuf, u32, bool)>) {
    use std::os::unix::fs::PermissionsExt;
    for entry in std::fs::read_dir(dir).unwrap() {
        let entry = entry.unwrap();
        let meta = std::fs::symlink_metadata(entry.path()).unwrap();
        if meta.file_type().is_symlink() {
            continue;
        }
        out.push((entry.path(), meta.permissions().mode() & 0o777, meta.is_dir()));
        if meta.is_dir() {
            modes_under(&entry.path(), out);
        }
    }
}

#[tokio::test]
async fn work_and_job_files_are_private_to_the_owner() {
    use std::os::unix::fs::PermissionsExt;
    let fx = Fixture::new();
    // What this process would create without the provider's care.
    let control = fx.work.path().join("control");
    std::fs::write(&control, "x").unwrap();
    if std::fs::metadata(&control).unwrap().permissions().mode() & 0o077 == 0 {
        eprintln!("note: the umask already makes files private; this test proves less");
    }
    fx.playbook(
        "create-thing.yml",
        r#"    - copy:
        dest: "{{ slipway.resource.properties.out }}"
        content: "secret"
"#,
    );
    let work_dir = fx.work.path().join("a/b");
    let p =
        AnsibleProvider::new(slipway_ansible::AnsibleOptions { work_dir: work_dir.clone(), ..fx.options() }).unwrap();
    for dir in [fx.work.path().join("a"), work_dir.clone()] {
        assert_eq!(std::fs::metadata(&dir).unwrap().permissions().mode() & 0o777, 0o700, "{}", dir.display());
    }
    let out = fx.work.path().join("written-by-the-playbook");
    let launched = p
        .launch(&request("0a7e5f1c-0000-4000-8000-000000000009:1", "Thing", json!({"out": out.display().to_string()})))
        .await
        .unwrap();
    let st = terminal(&p, &launched.handle, RUN_TIMEOUT).await;
    assert_eq!(st.state, JobState::Succeeded, "{st:?}");

    let job = work_dir.join(launched.handle.job_id.as_str());
    assert_eq!(std::fs::metadata(&job).unwrap().permissions().mode() & 0o777, 0o700);
    let mut entries = Vec::new();
    modes_under(&work_dir, &mut entries);
    let names: Vec<String> =
        entries.iter().map(|(p, ..)| p.strip_prefix(&work_dir).unwrap().display().to_string()).collect();
    for expected in ["runner.out", "runner.err", "job.json", "artifacts/run/status", "finished", ".locks"] {
        assert!(names.iter().any(|n| n.ends_with(expected)), "{expected} not among {names:?}");
    }
    // The extra vars (which carry opened secrets) exist only while the job runs.
    assert!(!names.iter().any(|n| n.ends_with("env/extravars")), "left behind: {names:?}");
    for (path, mode, is_dir) in &entries {
        assert_eq!(mode & 0o077, 0, "{} is {mode:o}: open to other users", path.display());
        if *is_dir {
            assert_eq!(*mode, 0o700, "{}", path.display());
        }
    }
    // What the playbook wrote without a mode of its own is private too (the job's umask).
    assert_eq!(std::fs::metadata(&out).unwrap().permissions().mode() & 0o077, 0, "the playbook's file");
}

#[tokio::test]
async fn output_is_readable_while_the_job_runs_and_gone_after_its_retention() {
    let fx = Fixture::new();
    let gate = fx.work.path().join("go-on");
    fx.playbook(
        "create-virtual-network.yml",
        &format!(
            r#"    - debug: msg="first line of output"
    - wait_for: path={gate} timeout=60
    - debug: msg="after the gate"
"#,
            gate = gate.display()
        ),
    );
    let p = AnsibleProvider::new(slipway_ansible::AnsibleOptions { job_retention: Duration::ZERO, ..fx.options() })
        .unwrap();
    let launched = p.launch(&request("output:1", "VirtualNetwork", json!({}))).await.unwrap();
    // Printed while the job still waits at the gate.
    let early = eventually("the first task's output", RUN_TIMEOUT, async || {
        let out = p.output(&launched.handle, 0).await.unwrap();
        out.text.contains("first line of output").then_some(out)
    })
    .await;
    assert!(!early.text.contains("after the gate"), "{early:?}");
    assert!(!early.text.contains('\u{1b}'), "no colour codes: {early:?}");
    assert_eq!(p.sweep().await, 0, "a running job's directory stays");
    std::fs::write(&gate, "").unwrap();
    let st = terminal(&p, &launched.handle, RUN_TIMEOUT).await;
    assert_eq!(st.state, JobState::Succeeded, "{st:?}");
    // The rest, from where the first read stopped.
    let rest = p.output(&launched.handle, early.next_offset).await.unwrap();
    assert!(rest.text.contains("after the gate") && rest.text.contains("PLAY RECAP"), "{rest:?}");
    assert!(!rest.text.contains("first line of output"), "{rest:?}");
    let end = p.output(&launched.handle, rest.next_offset).await.unwrap();
    assert_eq!((end.text.as_str(), end.next_offset), ("", rest.next_offset));

    // Past its (zero) retention, once its runner has exited.
    eventually("the finished job's directory is removed", RUN_TIMEOUT, async || (p.sweep().await == 1).then_some(()))
        .await;
    assert!(matches!(p.output(&launched.handle, 0).await, Err(ProviderError::NotFound(_))));
    assert!(matches!(p.status(std::slice::from_ref(&launched.handle)).await[0], Err(ProviderError::NotFound(_))));
}
