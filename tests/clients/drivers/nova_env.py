"""Nova's global config and context, as a nova service sets them up.

Imported by the Nova driver scripts beside it, which run in
``.client-venv`` (tools/client-venv.sh), never in node-agent's own
virtualenv.  Nova reads its options from one global ``CONF``; this module
fills it the way an operator's nova.conf would:

- ``[placement]``: keystoneauth's ``admin_token`` plugin with the
  Placement server's URL as its endpoint.  The test Placement runs
  ``auth_strategy = noauth2``, where the token ``admin`` is the admin user,
  which is what a real ``[placement]`` user with the admin role is.
- ``state_path``: where ``nova.virt.node`` keeps ``compute_id``.
- ``transport_url = fake:/`` with the ``noop`` notification driver: the
  scheduler manager sends notifications through oslo.messaging, and no
  broker is needed to send none.
"""

import os
import warnings

warnings.simplefilter('ignore')

from jsonio import answer, read_request  # noqa: E402,F401


def setup(workdir, placement_url, host, options=()):
    """Write ``workdir/etc/nova.conf`` and load it into Nova's ``CONF``.

    The file is what an operator writes; Nova loads it as its services do
    (``nova.config.parse_args``).  ``state_path`` is ``workdir/state``.

    :param options: extra ``(section, option, value)`` lines.
    :returns: ``(CONF, admin RequestContext)``.
    """
    import nova.conf
    from nova import config
    from nova import context
    from nova import objects

    etc = os.path.join(workdir, 'etc')
    state = os.path.join(workdir, 'state')
    os.makedirs(etc, exist_ok=True)
    os.makedirs(state, exist_ok=True)
    sections = {
        'DEFAULT': {'host': host, 'state_path': state,
                    'transport_url': 'fake:/'},
        'oslo_messaging_notifications': {'driver': 'noop'},
        'placement': {'auth_type': 'admin_token', 'endpoint': placement_url,
                      'token': 'admin'},
    }
    for section, option, value in options:
        sections.setdefault(section, {})[option] = value
    path = os.path.join(etc, 'nova.conf')
    with open(path, 'w') as f:
        for section, values in sections.items():
            f.write(f'[{section}]\n')
            f.writelines(f'{k} = {v}\n' for k, v in values.items())
    conf = nova.conf.CONF
    objects.register_all()
    config.parse_args(['nova-test-driver', '--config-file', path],
                      default_config_files=[], configure_db=False,
                      init_rpc=True)
    return conf, context.get_admin_context()
