"""The model server side: capacity planning, ``reviewbot doctor`` and ``reviewbot loadtest``.

The planner (``capacity``, ``gpus``, ``model_shape``) and the judging halves (``doctor``:
what an answer means; ``loadtest``: prompts, figures and SLOs) are pure: data in, data out.
``doctor_probes`` and ``loadtest_driver`` talk to the services through the adapters, and the
``*_cli`` modules wire the commands.
"""
