"""asb-controller --snapshots against the strict test API server (issue 18, docs/snapshots.md "On
a cluster"): a SandboxSnapshot becomes VolumeSnapshots of the source's PVCs (class from the
annotation, else none: the cluster default), its Ready follows their readyToUse and error, and a
fork (image snapshot:NAME) gets PVCs with the VolumeSnapshots as dataSource and the source's
image. The test installs the VolumeSnapshot CRD and our SandboxSnapshot CRD (deploy/crds) into
the server; the test plays the CSI snapshotter by writing the VolumeSnapshots' status."""
import json
import os

from kube_fixtures import ROOT, EXT, condition, controller, fake, sandbox_obj, wait_for  # noqa: F401

CLASS = "agents.x-k8s.io/volume-snapshot-class"
VCT = [{"metadata": {"name": "workspace"},
        "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}}}]


def load_crd(path):
    with open(path) as f:
        return json.loads("".join(line for line in f if not line.startswith("#")))


def install_crds(fake):  # noqa: F811
    for p in (os.path.join(ROOT, "tests", "kube", "crds", "snapshot.storage.k8s.io_volumesnapshots.json"),
              os.path.join(ROOT, "deploy", "crds", "extensions.agents.x-k8s.io_sandboxsnapshots.yaml")):
        fake.create("customresourcedefinitions", load_crd(p), ns=None)


def snapshot_obj(name, sandbox, cls=None):
    md = {"name": name, **({"annotations": {CLASS: cls}} if cls else {})}
    return {"apiVersion": f"{EXT}/v1beta1", "kind": "SandboxSnapshot", "metadata": md,
            "spec": {"sandboxRef": {"name": sandbox}}}


def ready(fake, name):  # noqa: F811
    return condition(fake.get("sandboxsnapshots", name), "Ready") or {}


def source_sandbox(name):
    sb = sandbox_obj(name, image="python:3.12", volumeClaimTemplates=VCT)
    sb["spec"]["podTemplate"]["spec"]["containers"][0]["volumeMounts"] = [
        {"name": "workspace", "mountPath": "/workspace"}]
    return sb


def test_snapshot_maps_to_volume_snapshots_and_fork_restores_them(fake, controller):  # noqa: F811
    install_crds(fake)
    ctl = controller(args=["--snapshots"])
    fake.create("sandboxes", source_sandbox("src"))
    wait_for(lambda: fake.get("persistentvolumeclaims", "workspace-src"), what="source PVC")

    snap = fake.create("sandboxsnapshots", snapshot_obj("s1", "src", cls="csi-snapclass"))
    vs = wait_for(lambda: fake.get("volumesnapshots", "s1-workspace"), what="VolumeSnapshot")
    assert vs["spec"] == {"source": {"persistentVolumeClaimName": "workspace-src"},
                          "volumeSnapshotClassName": "csi-snapclass"}
    assert vs["metadata"]["ownerReferences"][0]["uid"] == snap["metadata"]["uid"]
    wait_for(lambda: ready(fake, "s1").get("reason") == "Capturing", what="Capturing")
    st = fake.get("sandboxsnapshots", "s1")["status"]
    assert st["source"]["sandbox"] == "src" and st["source"]["image"] == "python:3.12"
    assert st["source"]["volumeClaimTemplates"] == VCT
    assert st["volumeSnapshots"] == [{"volume": "workspace", "name": "s1-workspace", "readyToUse": False}]
    # The CSI snapshotter reports the snapshot usable.
    fake.patch("volumesnapshots", "s1-workspace", {"status": {"readyToUse": True, "restoreSize": "1Gi"}},
               sub="status")
    wait_for(lambda: ready(fake, "s1").get("status") == "True", what="s1 Ready")
    st = fake.get("sandboxsnapshots", "s1")["status"]
    assert ready(fake, "s1")["reason"] == "Captured" and st["capturedAt"].endswith("Z")
    assert st["volumeSnapshots"][0]["restoreSize"] == "1Gi"

    # Without the annotation: no class (the cluster default); a driver error fails it.
    fake.create("sandboxsnapshots", snapshot_obj("s2", "src"))
    vs2 = wait_for(lambda: fake.get("volumesnapshots", "s2-workspace"), what="second VolumeSnapshot")
    assert "volumeSnapshotClassName" not in vs2["spec"]
    fake.patch("volumesnapshots", "s2-workspace",
               {"status": {"readyToUse": False, "error": {"message": "driver: quota exceeded"}}}, sub="status")
    wait_for(lambda: ready(fake, "s2").get("reason") == "CaptureFailed", what="s2 failed")
    assert ready(fake, "s2")["status"] == "False" and "quota exceeded" in ready(fake, "s2")["message"]

    # Bad sources: a missing Sandbox, and one without a PVC for its root directory.
    fake.create("sandboxsnapshots", snapshot_obj("s3", "nope"))
    wait_for(lambda: ready(fake, "s3").get("reason") == "SandboxNotFound", what="SandboxNotFound")
    fake.create("sandboxes", sandbox_obj("bare"))
    fake.create("sandboxsnapshots", snapshot_obj("s4", "bare"))
    wait_for(lambda: ready(fake, "s4").get("reason") == "NoVolumes", what="NoVolumes")
    assert "On a cluster" in ready(fake, "s4")["message"]
    assert fake.list("volumesnapshots", selector="agents.x-k8s.io/sandbox-snapshot=s4") == []

    # A fork: what asb fork / asb_fork create from s1's status.source.
    fork = source_sandbox("fork")
    fork["spec"]["podTemplate"]["spec"]["containers"][0]["image"] = "snapshot:s1"
    fake.create("sandboxes", fork)
    pvc = wait_for(lambda: fake.get("persistentvolumeclaims", "workspace-fork"), what="fork PVC")
    assert pvc["spec"]["dataSource"] == {"apiGroup": "snapshot.storage.k8s.io", "kind": "VolumeSnapshot",
                                         "name": "s1-workspace"}
    pod = wait_for(lambda: fake.get("pods", "fork"), what="fork pod")
    assert pod["spec"]["containers"][0]["image"] == "python:3.12"
    # A fork of a snapshot that is not Ready waits, with neither PVC nor pod.
    bad = source_sandbox("fork2")
    bad["spec"]["podTemplate"]["spec"]["containers"][0]["image"] = "snapshot:s2"
    fake.create("sandboxes", bad)
    wait_for(lambda: "snapshot s2: SnapshotNotReady" in ctl.log_text(), what="fork2 waits")
    assert fake.get("persistentvolumeclaims", "workspace-fork2") is None
    assert fake.get("pods", "fork2") is None

    # Deleting the SandboxSnapshot deletes its VolumeSnapshots (ownerReferences).
    assert fake.delete("sandboxsnapshots", "s1").status_code == 200
    wait_for(lambda: fake.get("volumesnapshots", "s1-workspace") is None, what="VolumeSnapshot collected")


def test_deploy_rbac_covers_snapshots(tmp_path):
    """deploy/controller/rbac.yaml lets asb-controller --snapshots do all of the above: the test
    API server enforces exactly those rules for its token, and refuses nothing."""
    from kube_fixtures import Controller, FakeApi
    from test_kube_controller_rbac import forbidden, rules
    fake = FakeApi(tmp_path, rbac=rules())  # noqa: F811
    ctl = None
    try:
        install_crds(fake)
        ctl = Controller(fake, tmp_path, "rbac-snap", ["--snapshots"])
        fake.create("sandboxes", source_sandbox("src"))
        fake.create("sandboxsnapshots", snapshot_obj("s1", "src", cls="c"))
        wait_for(lambda: fake.get("volumesnapshots", "s1-workspace"), what="VolumeSnapshot")
        fake.patch("volumesnapshots", "s1-workspace", {"status": {"readyToUse": True}}, sub="status")
        wait_for(lambda: ready(fake, "s1").get("status") == "True", what="s1 Ready")
        fork = source_sandbox("fork")
        fork["spec"]["podTemplate"]["spec"]["containers"][0]["image"] = "snapshot:s1"
        fake.create("sandboxes", fork)
        wait_for(lambda: fake.get("pods", "fork"), what="fork pod")
        assert forbidden(fake) == {}, forbidden(fake)
    finally:
        if ctl:
            ctl.stop()
        fake.stop()
