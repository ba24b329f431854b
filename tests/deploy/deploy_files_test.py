"""Checks of deploy/ that need no cluster, container engine or root: what the container files
install, the Kubernetes manifests, and the configs the units and pods start the daemons with.

  deploy_files_test.py containers --source DIR --version V --arch A PACKAGE...
      Each Containerfile copies and installs packages that CPack makes (PACKAGE..., by name), under
      the file names CPack gives them, and runs as a numeric non-root user.
  deploy_files_test.py k8s --source DIR --bin-dir DIR --version V
      Every manifest passes kubernetes-validate --strict, offline; the pods run as the images' user,
      non-root, with read-only root file systems; images, Secrets, ConfigMap keys and volumes refer
      to what exists; and every daemon's command line with its ConfigMap TOML passes the daemon's
      own --check-config.
  deploy_files_test.py units --source DIR --bin-dir DIR
      Every unit's ExecStart, with its packaged TOML config, passes the daemon's --check-config.
"""

import argparse
import fnmatch
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile

# The uid Containerfile.* give the tunefarm user, which the pods run as.
CONTAINER_USER = "10001:10001"


def fail(message):
    print("FAIL: " + message, file=sys.stderr)
    sys.exit(1)


def check(condition, message):
    if not condition:
        fail(message)


def containerfile_lines(path):
    """The instructions of a Containerfile, continuation lines joined, comments dropped."""
    lines, current = [], ""
    with open(path) as f:
        for raw in f:
            line = raw.rstrip("\n")
            if line.lstrip().startswith("#"):
                continue
            if line.endswith("\\"):
                current += line[:-1] + " "
                continue
            current += line
            if current.strip():
                lines.append(current.strip())
            current = ""
    return lines


def check_containers(args):
    folder = os.path.join(args.source, "deploy", "containers")
    expected = {"Containerfile.server": "tunefarm-server", "Containerfile.agent": "tunefarm-agent"}
    made = set(args.packages)
    for name, main_package in expected.items():
        path = os.path.join(folder, name)
        check(os.path.isfile(path), f"{path} is missing")
        lines = containerfile_lines(path)
        check(any(re.match(r"FROM debian:(12|bookworm)\b", l) for l in lines), f"{name}: not FROM Debian 12")
        copies = [l for l in lines if l.startswith("COPY ")]
        patterns = [w for l in copies for w in l.split()[1:-1] if w.endswith(".deb")]
        check(patterns, f"{name} copies no .deb")
        copied = set()
        for pattern in patterns:
            package = pattern.split("_")[0]
            check(package in made, f"{name} copies {pattern}, but CPack makes no package {package} (it makes {sorted(made)})")
            file_name = f"{package}_{args.version}_{args.arch}.deb"
            concrete = pattern.replace("${TARGETARCH}", args.arch)
            check(fnmatch.fnmatch(file_name, concrete),
                  f"{name}: {pattern} does not match {file_name}, the file CPack writes for {args.arch}")
            copied.add(package)
        check(main_package in copied, f"{name} does not install {main_package}")
        installs = [l for l in lines if "apt-get install" in l]
        check(installs, f"{name} installs nothing with apt-get")
        users = [l.split()[1] for l in lines if l.startswith("USER ")]
        check(users and users[-1] == CONTAINER_USER, f"{name} must end as USER {CONTAINER_USER}, has {users}")
    print(f"containers: {', '.join(sorted(expected))} install {', '.join(sorted(made))} as named by CPack")


def load_manifests(folder):
    import yaml

    docs = []
    for name in sorted(os.listdir(folder)):
        if name.endswith((".yaml", ".yml")):
            with open(os.path.join(folder, name)) as f:
                docs += [(name, d) for d in yaml.safe_load_all(f) if d]
    return docs


def run_validator(paths, strict=True):
    validator = os.path.join(os.path.dirname(sys.executable), "kubernetes-validate")
    check(os.path.exists(validator), f"{validator} is missing: bash deploy/install-deps.sh installs it into the venv")
    command = [validator, "--quiet"] + (["--strict"] if strict else []) + paths
    return subprocess.run(command, capture_output=True, text=True)


def check_schemas(folder):
    paths = sorted(os.path.join(folder, n) for n in os.listdir(folder) if n.endswith((".yaml", ".yml")))
    result = run_validator(paths)
    check(result.returncode == 0, "kubernetes-validate:\n" + result.stdout + result.stderr)
    # The validator must be able to say no: a Deployment with a misspelt field is refused.
    with tempfile.NamedTemporaryFile("w", suffix=".yaml") as broken:
        with open(os.path.join(folder, "30-trackerd.yaml")) as f:
            broken.write(f.read().replace("readOnlyRootFilesystem:", "readOnlyRootFileSystem:", 1))
        broken.flush()
        result = run_validator([broken.name])
        check(result.returncode != 0 and "readOnlyRootFileSystem" in result.stdout + result.stderr,
              "kubernetes-validate accepted a misspelt field: " + result.stdout + result.stderr)
    print(f"k8s: {len(paths)} manifests pass kubernetes-validate --strict")


def pod_spec(doc):
    return doc["spec"]["template"]["spec"]


def config_file_of(container, spec, configmaps):
    """The ConfigMap text that `--config PATH` of the container names, through its volume mounts."""
    command = container["command"]
    path = command[command.index("--config") + 1]
    for mount in container.get("volumeMounts", []):
        prefix = mount["mountPath"].rstrip("/") + "/"
        if not path.startswith(prefix):
            continue
        volume = next(v for v in spec["volumes"] if v["name"] == mount["name"])
        check("configMap" in volume, f"{path} is not on a ConfigMap volume")
        cm = configmaps[volume["configMap"]["name"]]
        items = {i["path"]: i["key"] for i in volume["configMap"].get("items", [])} or {k: k for k in cm}
        relative = path[len(prefix):]
        check(relative in items, f"{path}: the ConfigMap volume has no item {relative}")
        check(items[relative] in cm, f"the ConfigMap has no key {items[relative]}")
        return cm[items[relative]]
    fail(f"{container['name']}: --config {path} is on no mounted volume")


def check_config(bin_dir, command, toml, env, where):
    """The daemon of `command`, given its arguments with `toml` as --config, accepts them."""
    with tempfile.NamedTemporaryFile("w", suffix=".toml") as f:
        f.write(toml)
        f.flush()
        argv = list(command)
        argv[argv.index("--config") + 1] = f.name
        argv[0] = os.path.join(bin_dir, os.path.basename(argv[0]))
        result = subprocess.run(argv + ["--check-config"], capture_output=True, text=True,
                                env={**os.environ, **env})
        check(result.returncode == 0,
              f"{where}: {shlex.join(argv)} --check-config exited {result.returncode}: {result.stdout}{result.stderr}")


def check_k8s(args):
    folder = os.path.join(args.source, "deploy", "k8s")
    check_schemas(folder)
    docs = load_manifests(folder)
    secrets = {d["metadata"]["name"]: {**d.get("data", {}), **d.get("stringData", {})} for _, d in docs if d["kind"] == "Secret"}
    configmaps = {d["metadata"]["name"]: d["data"] for _, d in docs if d["kind"] == "ConfigMap"}
    workloads = [(n, d) for n, d in docs if d["kind"] in ("Deployment", "StatefulSet", "DaemonSet")]
    kinds = {(d["kind"], d["metadata"]["name"]) for _, d in workloads}
    check(("Deployment", "trackerd") in kinds and ("StatefulSet", "tunerd") in kinds,
          f"trackerd must be a Deployment and tunerd a StatefulSet: {sorted(kinds)}")
    services = {d["metadata"]["name"] for _, d in docs if d["kind"] == "Service"}
    check({"trackerd", "tunerd"} <= services, f"Services: {sorted(services)}")
    daemonsets = [d for _, d in workloads if d["kind"] == "DaemonSet"]
    arches = {pod_spec(d).get("nodeSelector", {}).get("kubernetes.io/arch") for d in daemonsets}
    check({"amd64", "arm64"} <= arches, f"agent pools' architectures: {arches}")
    gpu = [d for d in daemonsets
           if any("nvidia.com/gpu" in c.get("resources", {}).get("limits", {}) for c in pod_spec(d)["containers"])]
    check(gpu, "no agent pool requests nvidia.com/gpu")
    uid, gid = (int(x) for x in CONTAINER_USER.split(":"))
    checked = 0
    for name, doc in workloads:
        where = f"{name}: {doc['kind']} {doc['metadata']['name']}"
        spec = pod_spec(doc)
        security = spec.get("securityContext", {})
        check(security.get("runAsNonRoot") is True, f"{where}: runAsNonRoot is not true")
        check((security.get("runAsUser"), security.get("runAsGroup")) == (uid, gid),
              f"{where}: runs as {security.get('runAsUser')}:{security.get('runAsGroup')}, the images' user is {CONTAINER_USER}")
        # Secret and volume files are readable by the daemons through their group.
        check(security.get("fsGroup") == gid, f"{where}: fsGroup {security.get('fsGroup')}, expected {gid}")
        for container in spec["containers"]:
            cwhere = f"{where}, container {container['name']}"
            csec = container.get("securityContext", {})
            check(csec.get("allowPrivilegeEscalation") is False and csec.get("readOnlyRootFilesystem") is True,
                  f"{cwhere}: privilege escalation must be off and the root file system read-only")
            program = container["command"][0]
            image = "tunefarm-agent" if program == "device-agent" else "tunefarm-server"
            check(container["image"] == f"{image}:{args.version}",
                  f"{cwhere}: image {container['image']}, expected {image}:{args.version}")
            env = {}
            for var in container.get("env", []):
                ref = var.get("valueFrom", {}).get("secretKeyRef")
                if ref:
                    check(ref["key"] in secrets.get(ref["name"], {}), f"{cwhere}: no Secret {ref['name']} key {ref['key']}")
                    env[var["name"]] = secrets[ref["name"]][ref["key"]]
            for volume in spec.get("volumes", []):
                if "secret" in volume:
                    for item in volume["secret"].get("items", []):
                        check(item["key"] in secrets.get(volume["secret"]["secretName"], {}),
                              f"{cwhere}: no Secret {volume['secret']['secretName']} key {item['key']}")
            toml = config_file_of(container, spec, configmaps)
            # Kubernetes expands $(VAR) in a command from the container's environment.
            command = [re.sub(r"\$\((\w+)\)", lambda m: f"value-of-{m.group(1)}", a) for a in container["command"]]
            check_config(args.bin_dir, command, toml, env, cwhere)
            checked += 1
            if doc["kind"] == "StatefulSet":
                data_dir = re.search(r'^data-dir\s*=\s*"([^"]+)"', toml, re.M).group(1)
                claims = {t["metadata"]["name"] for t in doc["spec"].get("volumeClaimTemplates", [])}
                on_claim = [m for m in container["volumeMounts"]
                            if m["name"] in claims and data_dir.startswith(m["mountPath"].rstrip("/") + "/")]
                check(on_claim, f"{cwhere}: data-dir {data_dir} is not on a volume claim ({sorted(claims)})")
    print(f"k8s: {len(workloads)} workloads as non-root {CONTAINER_USER}; {checked} daemon command lines "
          f"with their ConfigMap configs pass --check-config")


def check_units(args):
    units = os.path.join(args.source, "deploy", "systemd")
    configs = os.path.join(args.source, "deploy", "config")
    names = sorted(n for n in os.listdir(units) if n.endswith(".service"))
    check(names, f"no units in {units}")
    used = set()
    for name in names:
        with open(os.path.join(units, name)) as f:
            exec_start = re.search(r"^ExecStart=(.+)$", f.read(), re.M)
        check(exec_start, f"{name} has no ExecStart")
        # A template's instance name is the device key.
        command = shlex.split(exec_start.group(1).replace("%i", "x86-avx512"))
        config = command[command.index("--config") + 1]
        check(config.startswith("/etc/tunefarm/"), f"{name}: --config {config} is not under /etc/tunefarm")
        packaged = os.path.join(configs, os.path.basename(config))
        check(os.path.isfile(packaged), f"{name}: {config} is not one of deploy/config's files")
        with open(packaged) as f:
            check_config(args.bin_dir, command, f.read(), {}, name)
        used.add(os.path.basename(config))
    unused = set(os.listdir(configs)) - used
    check(not unused, f"configs no unit reads: {sorted(unused)}")
    print(f"units: {', '.join(names)} start with configs their daemons accept")


def main():
    parser = argparse.ArgumentParser()
    sub = parser.add_subparsers(dest="what", required=True)
    containers = sub.add_parser("containers")
    containers.add_argument("--source", required=True)
    containers.add_argument("--version", required=True)
    containers.add_argument("--arch", required=True)
    containers.add_argument("packages", nargs="+")
    k8s = sub.add_parser("k8s")
    k8s.add_argument("--source", required=True)
    k8s.add_argument("--bin-dir", required=True)
    k8s.add_argument("--version", required=True)
    units = sub.add_parser("units")
    units.add_argument("--source", required=True)
    units.add_argument("--bin-dir", required=True)
    args = parser.parse_args()
    # Offline means offline: where this process may make a network namespace (root, mostly), the
    # manifests are checked without a network at all.
    if args.what == "k8s" and not os.environ.get("TUNEFARM_OFFLINE") and shutil.which("unshare") and \
            subprocess.run(["unshare", "--net", "true"], capture_output=True).returncode == 0:
        os.environ["TUNEFARM_OFFLINE"] = "1"
        os.execvp("unshare", ["unshare", "--net", sys.executable] + sys.argv)
    {"containers": check_containers, "k8s": check_k8s, "units": check_units}[args.what](args)


if __name__ == "__main__":
    main()
