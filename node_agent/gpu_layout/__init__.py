"""The GPU layout the operator declares, restored on the host.

::

    conf [gpu_layout:...]  --target.targets(conf, snapshot)-->  Target
    Target + snapshot + holds  --plan.plan()-->  Plan (steps, refused)
    Plan  --apply.apply(plan, settings)-->  Outcome (done, failed)

The declared layout (:mod:`node_agent.conf.gpu_layout`) is matched with the
host's GPUs (:mod:`.target`), the steps it needs are planned in the order
the hardware needs them, and refused where they would disturb a device
something holds (:mod:`.plan`, pure), then taken one by one through the
one module that writes a device's settings, each read back (:mod:`.apply`).
``node-agent-manage layout apply`` and the daemon's start both run it;
then the daemon keeps the devices not as declared reserved and names every
step not taken (:mod:`.readiness`).
"""
