"""The repository holds source, docs, recordings and tests only.

No build artefact (a wheel, an archive) and no generated host is
committed, and nothing in the code or the docs sends its reader outside
the repository.
"""

import os
import re
import shutil
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__)))))
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


def _virtualenvs():
    """The virtualenvs the tools create at the root: every ``.venv``-like
    name in .gitignore and under tools/."""
    names = {'.venv'}
    with open(os.path.join(ROOT, '.gitignore')) as f:
        names |= {m.group(1) for m in re.finditer(
            r'^/?(\.[a-z-]*venv)/?$', f.read(), re.M)}
    for dirpath, _, files in os.walk(os.path.join(ROOT, 'tools')):
        for name in files:
            with open(os.path.join(dirpath, name), errors='replace') as f:
                names |= set(re.findall(r'(?<![\w.])(\.[a-z-]+venv)\b',
                                        f.read()))
    return sorted(names)


def test_flake8_lints_the_project_and_no_virtualenv(tmp_path):
    """``tox -e pep8`` is flake8 from the root with tox.ini's settings:
    the virtualenvs beside the code (16,000 files) are not linted."""
    venvs = _virtualenvs()
    assert {'.venv', '.client-venv', '.keystone-venv'} <= set(venvs)
    shutil.copy(os.path.join(ROOT, 'tox.ini'), tmp_path)
    for name in venvs + ['node_agent']:
        package = tmp_path / name / 'lib' / 'site-packages'
        package.mkdir(parents=True)
        (package / 'unused.py').write_text('import os\n')
    flake8 = os.path.join(os.path.dirname(sys.executable), 'flake8')
    result = subprocess.run([flake8, '--format=%(path)s %(code)s'],
                            cwd=tmp_path, capture_output=True, text=True,
                            timeout=60)
    assert result.stdout.splitlines() == [
        './node_agent/lib/site-packages/unused.py F401'], result.stderr
