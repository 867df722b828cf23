"""Another writer of one instance's allocation, with Nova 34's own report
client.

Run with ``.client-venv/bin/python``; JSON request on stdin::

    {"workdir": DIR, "placement_url": URL, "consumer": INSTANCE_UUID,
     "allocations": {RP_UUID: {RESOURCE_CLASS: AMOUNT}}}

Nova's ``SchedulerReportClient`` reads the consumer
(``get_allocs_for_consumer``: ``GET /allocations/{instance}``) and writes
it back holding ``allocations`` instead (``put_allocations``: ``PUT
/allocations/{instance}`` with the project, user and consumer generation
it just read), as Nova rewrites an instance's allocation it believes in
(``nova-manage placement heal_allocations``, a periodic of its own).

Answer: ``{"written": true|false, "consumer_generation": N}`` (the one
the write carried).
"""

import nova_env


def main():
    request = nova_env.read_request()
    _, ctx = nova_env.setup(request['workdir'], request['placement_url'],
                            'compute1')

    from nova.scheduler.client import report

    client = report.SchedulerReportClient()
    consumer = request['consumer']
    record = client.get_allocs_for_consumer(ctx, consumer)
    payload = {
        'allocations': {rp: {'resources': resources} for rp, resources
                        in request['allocations'].items()},
        'project_id': record['project_id'],
        'user_id': record['user_id'],
        'consumer_generation': record['consumer_generation'],
    }
    written = client.put_allocations(ctx, consumer, payload)
    nova_env.answer({'written': bool(written),
                     'consumer_generation': record['consumer_generation']})


if __name__ == '__main__':
    main()
