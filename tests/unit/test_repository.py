"""The repository holds source, docs, recordings and tests only.

No build artefact (a wheel, an archive) and no generated host is
committed, and nothing in the code or the docs sends its reader outside
the repository.
"""

import os
import re
import subprocess

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))))
ARTEFACT = re.compile(
    r'\.(whl|egg|tar|tar\.gz|tgz|tar\.bz2|tar\.xz|zip|pyc|so)$'
    r'|^\.[a-z-]*venv(/|$)')
# Generated at test time by tests/fixtures/hosts/make_hosts.py.
GENERATED = re.compile(
    r'^tests/fixtures/hosts/(host\d+/|h100-vm/libvirt\.xml$)')
# What points outside: the design notes beside the checkout, or the
# documents the product was specified from.
OUTSIDE = re.compile(r'\.\./shared|\bseeds?/|\b00\d_[0-9a-f]{16}\b')


def tracked():
    out = subprocess.run(['git', 'ls-files', '-z'], cwd=ROOT, check=True,
                         capture_output=True).stdout
    return [p for p in out.decode().split('\0') if p]


def test_no_build_artefact_or_generated_host_is_committed():
    files = tracked()
    assert 'node_agent/__init__.py' in files
    assert [p for p in files if ARTEFACT.search(p)] == []
    assert [p for p in files if GENERATED.search(p)] == []


def test_code_and_docs_refer_only_to_the_repository():
    found = []
    for path in tracked():
        if not (path.startswith(('node_agent/', 'doc/', 'bench/',
                                 'tools/', 'systemd/', 'etc/'))
                or path == 'README.md'):
            continue
        with open(os.path.join(ROOT, path), encoding='utf-8',
                  errors='replace') as f:
            for number, line in enumerate(f, 1):
                if OUTSIDE.search(line):
                    found.append(f'{path}:{number}: {line.strip()}')
    assert found == []


def test_the_guard_sees_what_it_guards_against():
    assert ARTEFACT.search('flake8-7.5.0-py2.py3-none-any.whl')
    assert ARTEFACT.search('.client-venv')
    assert GENERATED.search('tests/fixtures/hosts/host2/sys/x')
    assert not GENERATED.search('tests/fixtures/hosts/h100-vm/sys/x')
    assert OUTSIDE.search('see ../shared/DESIGN.md')
    assert OUTSIDE.search('Seed ``000_74ed081f2e069e50`` lays')
