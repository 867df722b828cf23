"""node_agent.api.wsgi:application as a WSGI server loads it: the
configuration files of NODE_AGENT_API_CONFIG, read at the first request."""

import webob

from node_agent.api import wsgi
from node_agent.api.db import migration


def test_application_reads_the_files_named_by_the_environment(
        tmp_path, monkeypatch):
    state = tmp_path / 'state'
    base = tmp_path / 'node-agent.conf'
    base.write_text(f'[DEFAULT]\nstate_path = {state}\n'
                    'deployment = standalone\n')
    extra = tmp_path / 'api.conf'
    extra.write_text('[api]\nmax_request_body_size = 2048\n')
    monkeypatch.setenv(wsgi.CONFIG_ENV, f'{base},{extra}')
    # The test process keeps its own logging.
    monkeypatch.setattr(wsgi.logging, 'setup', lambda conf, name: None)
    migration.sync(wsgi.load_conf([str(base)]))

    app = wsgi._Lazy()     # what "application" is, unloaded
    resp = webob.Request.blank('/v2/device_profiles').get_response(app)
    assert resp.status_code == 200
    assert resp.json == {'device_profiles': []}
    # The second file counts: its body limit.
    req = webob.Request.blank('/v2/device_profiles', method='POST',
                              body=b' ' * 4096,
                              content_type='application/json')
    resp = req.get_response(app)
    assert resp.status_code == 413
    assert b'2048 bytes' in resp.body
    assert (state / 'api.sqlite').is_file()
    app._app.service.close()
