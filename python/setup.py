"""Builds the tunefarm package: the gRPC stubs are generated from the repository's proto/ files
with grpcio-tools every time the package is built, so they always match the services' contracts
and are never kept in the source tree.

An sdist carries a copy of the proto files (proto/ beside this file); a build from the repository
reads ../proto.
"""
import atexit
import os
import re
import shutil
import tempfile

from setuptools import setup
from setuptools.command.build_py import build_py
from setuptools.command.sdist import sdist

HERE = os.path.dirname(os.path.abspath(__file__))


def proto_root():
    for root in (os.path.join(HERE, "..", "proto"), os.path.join(HERE, "proto")):
        if os.path.isdir(os.path.join(root, "tunefarm", "v1")):
            return os.path.normpath(root)
    raise SystemExit("tunefarm: the proto files (proto/tunefarm/v1/*.proto) are not beside python/")


def generate(out_dir):
    """Writes tunefarm/v1/*_pb2.py and *_pb2_grpc.py under out_dir; answers the protobuf version
    the messages were generated for."""
    import grpc_tools
    from grpc_tools import protoc

    root = proto_root()
    v1 = os.path.join(root, "tunefarm", "v1")
    files = sorted(os.path.join(v1, f) for f in os.listdir(v1) if f.endswith(".proto"))
    well_known = os.path.join(os.path.dirname(grpc_tools.__file__), "_proto")
    args = ["grpc_tools.protoc", f"-I{root}", f"-I{well_known}", f"--python_out={out_dir}",
            f"--pyi_out={out_dir}", f"--grpc_python_out={out_dir}", *files]
    if protoc.main(args) != 0:
        raise SystemExit("tunefarm: generating the gRPC stubs from proto/ failed")
    package = os.path.join(out_dir, "tunefarm", "v1")
    with open(os.path.join(package, "__init__.py"), "w") as f:
        f.write('"""Messages and stubs generated from proto/tunefarm/v1 when the package was built."""\n')
    with open(os.path.join(package, "common_pb2.py")) as f:
        found = re.search(r"# Protobuf Python Version: (\d+)\.(\d+)\.(\d+)", f.read())
    if not found:
        raise SystemExit("tunefarm: cannot tell which protobuf version the stubs were generated for")
    return tuple(int(x) for x in found.groups())


GENERATED = tempfile.mkdtemp(prefix="tunefarm-stubs-")
atexit.register(shutil.rmtree, GENERATED, True)
PROTOBUF = generate(GENERATED)


def grpc_version():
    from grpc_tools import grpc_version as v
    return v.VERSION


class BuildWithStubs(build_py):
    """build_py that adds the generated tunefarm.v1 package to what is built."""

    def run(self):
        super().run()
        target = os.path.join(self.build_lib, "tunefarm", "v1")
        shutil.rmtree(target, ignore_errors=True)
        shutil.copytree(os.path.join(GENERATED, "tunefarm", "v1"), target)


class SdistWithProtos(sdist):
    """An sdist carries the proto files, so that it builds away from the repository."""

    def make_release_tree(self, base_dir, files):
        super().make_release_tree(base_dir, files)
        shutil.copytree(os.path.join(proto_root(), "tunefarm"), os.path.join(base_dir, "proto", "tunefarm"),
                        dirs_exist_ok=True)


setup(
    install_requires=[
        "numpy>=1.24",
        # The stubs check at import that the runtime is at least what generated them.
        f"grpcio>={grpc_version()}",
        f"protobuf>={PROTOBUF[0]}.{PROTOBUF[1]}.{PROTOBUF[2]},<{PROTOBUF[0] + 1}",
    ],
    cmdclass={"build_py": BuildWithStubs, "sdist": SdistWithProtos},
)
