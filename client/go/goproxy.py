#!/usr/bin/env python3
"""Makes DIR a Go module proxy (GOPROXY=file://DIR) that serves the Go client,
egress.internal/client at client/VERSION, and every module it needs, offline, from
Debian's Go sources (/usr/share/gocode/src, GOPATH layout):

    client/go/goproxy.py DIR

- egress.internal/client: client/go's go.mod and sources, with the stubs protoc-gen-go
  and protoc-gen-go-grpc generate from proto/egress/v1/egress.proto in egress/egressv1.
- Each module that provides a package the client imports (grpc-go, protobuf-go, genproto,
  x/net, ...): Debian's copy of the packages it needs and its own go.mod, under the
  highest version any go.mod in the graph asks for (so that minimal version selection
  picks it).
- Every other module@version the graph names: a go.mod with no requirements, so the
  graph resolves without them (none of their packages is built).

The zips are Debian's sources, not upstream's: go.sum entries differ from the checksum
database's, so a project installs with GOSUMDB=off (or GONOSUMDB for these modules)."""

import datetime
import json
import os
import pathlib
import re
import shutil
import subprocess
import sys
import tempfile
import zipfile

HERE = pathlib.Path(os.path.abspath(__file__)).parent  # not resolve(): see python/stubs.py
ROOT = HERE.parent.parent
GOCODE = pathlib.Path("/usr/share/gocode/src")
MODULE = "egress.internal/client"
TIME = "2020-01-01T00:00:00Z"


def requirements(go_mod: str):
    """The (module, version) pairs of a go.mod's require directives."""
    pairs = []
    block = False
    for line in go_mod.splitlines():
        line = line.split("//")[0].strip()
        if block:
            if line == ")":
                block = False
            elif line:
                pairs.append(tuple(line.split()[:2]))
        elif line == "require (":
            block = True
        elif line.startswith("require "):
            pairs.append(tuple(line.split()[1:3]))
    return pairs


def semver_key(version: str):
    """A sort key of a Go module version (semver; a pre-release sorts before its release)."""
    match = re.match(r"v(\d+)\.(\d+)\.(\d+)(?:-([^+]*))?(?:\+.*)?$", version)
    if not match:
        raise ValueError(f"not a module version: {version}")
    major, minor, patch, pre = match.groups()
    pre_key = [] if pre is None else [
        (0, int(part), "") if part.isdigit() else (1, 0, part) for part in pre.split(".")]
    return (int(major), int(minor), int(patch), pre is None, pre_key)


def escape(path: str) -> str:
    """A module path as the proxy protocol spells it (upper case as !lower)."""
    return re.sub(r"[A-Z]", lambda m: "!" + m.group(0).lower(), path)


def module_root(package_dir: pathlib.Path) -> pathlib.Path:
    for directory in [package_dir, *package_dir.parents]:
        if (directory / "go.mod").exists():
            return directory
        if directory == GOCODE:
            break
    raise SystemExit(f"goproxy.py: no go.mod above {package_dir}")


def serve(proxy: pathlib.Path, module: str, version: str, go_mod: str, files=None):
    """Writes module@version into the proxy: its go.mod and, with `files` ({path in the
    module: source file}), its .info, its zip and its version list."""
    at = proxy / escape(module) / "@v"
    at.mkdir(parents=True, exist_ok=True)
    (at / f"{version}.mod").write_text(go_mod)
    if files is None:
        return
    (at / f"{version}.info").write_text(json.dumps({"Version": version, "Time": TIME}))
    with zipfile.ZipFile(at / f"{version}.zip", "w", zipfile.ZIP_DEFLATED) as archive:
        for name, source in sorted(files.items()):
            archive.write(source, f"{module}@{version}/{name}")
    with open(at / "list", "a") as versions:
        versions.write(version + "\n")


def client_module(work: pathlib.Path) -> pathlib.Path:
    """client/go with its generated stubs, in work/module."""
    module = work / "module"
    shutil.copytree(HERE, module, ignore=shutil.ignore_patterns("*.py", "*.sh", "__pycache__"))
    imports = f"Megress/v1/egress.proto={MODULE}/egress/egressv1"
    subprocess.run(["protoc", f"--proto_path={ROOT / 'proto'}", "--proto_path=/usr/include",
                    f"--go_out={module}", f"--go_opt={imports}", f"--go_opt=module={MODULE}",
                    f"--go-grpc_out={module}", f"--go-grpc_opt={imports}",
                    f"--go-grpc_opt=module={MODULE}",
                    str(ROOT / "proto/egress/v1/egress.proto")], check=True)
    return module


def imported_packages(work: pathlib.Path, module: pathlib.Path):
    """The directories of the non-standard packages the client's packages import, as
    Debian's GOPATH has them."""
    gopath = work / "gopath"
    (gopath / "src" / MODULE).parent.mkdir(parents=True)
    (gopath / "src" / MODULE).symlink_to(module)
    env = dict(os.environ, GO111MODULE="off", GOPATH=f"{gopath}:{GOCODE.parent}", GOFLAGS="",
               GOPROXY="off", GOENV="off", GOTOOLCHAIN="local", CGO_ENABLED="0",
               GOCACHE=str(work / "go-cache"))
    listed = subprocess.run(
        ["go", "list", "-deps", "-f", "{{if not .Standard}}{{.Dir}}{{end}}",
         f"{MODULE}/egress", f"{MODULE}/example"],
        env=env, cwd=gopath, check=True, capture_output=True, text=True).stdout
    return [pathlib.Path(d) for d in listed.split() if d.startswith(str(GOCODE))]


def main():
    proxy = pathlib.Path(sys.argv[1]).absolute()
    version = "v" + (ROOT / "client/VERSION").read_text().strip()
    shutil.rmtree(proxy, ignore_errors=True)
    proxy.mkdir(parents=True)
    with tempfile.TemporaryDirectory() as tmp:
        work = pathlib.Path(tmp)
        module = client_module(work)
        own_mod = (module / "go.mod").read_text()
        serve(proxy, MODULE, version, own_mod,
              {str(p.relative_to(module)): p for p in module.rglob("*") if p.is_file()})

        # Debian's modules the client builds with: the packages it needs from each.
        needed = {}  # module path -> {path in the module: file}
        roots = {}
        for package_dir in imported_packages(work, module):
            root = module_root(package_dir)
            path = str(root.relative_to(GOCODE))
            roots[path] = root
            files = needed.setdefault(path, {"go.mod": root / "go.mod"})
            for name in ("LICENSE", "COPYING"):
                if (root / name).exists():
                    files[name] = root / name
            for source in package_dir.iterdir():
                if source.is_file():
                    files[str(source.relative_to(root))] = source

        # The graph: every module@version the client's and those modules' go.mods name.
        named = {}
        for path, wanted in requirements(own_mod) + [
                pair for p in needed for pair in requirements((roots[p] / "go.mod").read_text())]:
            named.setdefault(path, set()).add(wanted)
        for path, files in needed.items():
            label = max(named.get(path, set()), key=semver_key, default=None)
            if label is None:
                raise SystemExit(f"goproxy.py: {path} is needed but no go.mod requires it")
            serve(proxy, path, label, (roots[path] / "go.mod").read_text(), files)
            named[path].discard(label)
        for path, versions in named.items():
            for other in versions:
                serve(proxy, path, other, f"module {path}\n")


if __name__ == "__main__":
    main()
