"""Builds egress_client with its generated parts (stubs.py): the stubs of egress.v1 and
google.rpc from the repository's proto/, and the version from client/VERSION."""

import os
import pathlib
import sys

from setuptools import setup
from setuptools.command.build_py import build_py

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import stubs  # noqa: E402


class BuildPyWithStubs(build_py):
    def run(self):
        super().run()
        stubs.generate(pathlib.Path(self.build_lib) / "egress_client")


setup(version=stubs.version(), cmdclass={"build_py": BuildPyWithStubs})
