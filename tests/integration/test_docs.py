"""Every shell block marked runnable in the README and doc/ runs.

A fenced ``sh`` block right after a line ``<!-- runnable -->`` is run
with ``bash -euo pipefail``, as a reader would from the repository root,
with ``.venv/bin`` first on PATH.  It runs in a copy of the repository's
``etc/`` and ``tools/`` in a temporary directory, so a block that runs the
agent on the quick start's configuration keeps its state there, never in
this checkout.  Each block must exit 0.  And every link between the
pages leads to a file that exists.
"""

import os
import re
import shutil
import subprocess
import sys

import pytest

pytestmark = pytest.mark.integration

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), '..', '..'))
MARKER = '<!-- runnable -->'
FENCE = re.compile(r'^```(\w*)\s*$')


def pages():
    docs = os.path.join(REPO, 'doc')
    return ['README.md'] + sorted(
        os.path.join('doc', name) for name in os.listdir(docs)
        if name.endswith('.md'))


def runnable_blocks(text):
    """``[(line number, script)]`` of the blocks marked runnable."""
    lines = text.splitlines()
    blocks = []
    for n, line in enumerate(lines):
        if line.strip() != MARKER:
            continue
        fence = FENCE.match(lines[n + 1]) if n + 1 < len(lines) else None
        assert fence and fence.group(1) in ('sh', 'bash', 'shell'), (
            f'line {n + 1}: {MARKER} must come right before a ```sh block')
        end = next(i for i in range(n + 2, len(lines))
                   if lines[i].strip() == '```')
        blocks.append((n + 3, '\n'.join(lines[n + 2:end])))
    return blocks


def all_blocks():
    found = []
    for page in pages():
        with open(os.path.join(REPO, page)) as f:
            for line, script in runnable_blocks(f.read()):
                found.append(pytest.param(script, id=f'{page}:{line}'))
    return found


def test_the_marker_finds_blocks_and_only_marked_ones():
    text = ('```sh\nnot this\n```\n' + MARKER + '\n```sh\necho one\n```\n'
            + MARKER + '\n```bash\necho two\necho three\n```\n')
    assert runnable_blocks(text) == [(6, 'echo one'),
                                     (10, 'echo two\necho three')]
    # The pages hold some: the test below cannot pass on nothing.
    assert len(all_blocks()) >= 3


@pytest.mark.parametrize('script', all_blocks())
def test_runnable_block(script, tmp_path):
    for name in ('etc', 'tools'):
        shutil.copytree(os.path.join(REPO, name), tmp_path / name)
    env = dict(os.environ)
    env['PATH'] = os.path.dirname(sys.executable) + os.pathsep + env['PATH']
    done = subprocess.run(['bash', '-euo', 'pipefail', '-c', script],
                          cwd=tmp_path, env=env, capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    assert 'Traceback' not in done.stderr, done.stderr


LINK = re.compile(r'\]\(([^)#\s]+)(#[^)]*)?\)')


def test_links_between_the_pages_lead_somewhere():
    broken = []
    for page in pages():
        with open(os.path.join(REPO, page)) as f:
            text = f.read()
        for target, _ in LINK.findall(text):
            if '://' in target:
                continue
            path = os.path.normpath(os.path.join(
                REPO, os.path.dirname(page), target))
            if not os.path.exists(path):
                broken.append(f'{page}: {target}')
    assert broken == []
    with open(os.path.join(REPO, 'README.md')) as f:
        assert len(LINK.findall(f.read())) >= 8    # the map is there
