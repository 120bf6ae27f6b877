"""The model server side: capacity planning, ``reviewbot doctor`` and ``reviewbot loadtest``.

The planner (``capacity``, ``gpus``, ``model_shape``) and the judging halves (``doctor``:
what an answer means; ``loadtest``: prompts, figures and SLOs) are pure: data in, data out.
``vllm_command`` writes the ``vllm serve`` line of a plan. ``doctor_probes`` and
``loadtest_driver`` talk to the services through the adapters; ``loadtest_plan`` reads a load
test's inputs and plans them as reviews. The commands are ``reviewbot.commands.ops``.

Owns: only the package. Must not: import its modules (``reviewbot capacity`` loads the planner
alone, never the probes' HTTP client).
"""
