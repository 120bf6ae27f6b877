"""The model adapter: review chunks with an OpenAI-compatible model server, concurrently.

Its vocabulary (requests, call records, answers, the two Protocols, the errors) is
``reviewbot.model``'s, on the ground floor: code that needs the data (the pipeline,
``reviewbot plan``) imports it from there and never loads a transport.

- ``runner``: :class:`ChunkRunner`, the one ``LLMClient``: concurrency, model slots,
  retries, output-mode fallback, call timing.
- ``rounds`` and ``tries``: the tool rounds of one chunk and the tries of one request.
- ``answers``: reading an answer into ``report_finding`` calls (pure).
- ``prefill``: the prefix-cache warm-up.
- ``openai_compatible`` and ``vllm``: the transports (httpx).
- ``factory``: :func:`model_from_settings`, the backend chosen by ``REVIEWBOT_LLM_BACKEND``.

Owns: the package's layout, nothing else. Must not: hold vocabulary (``reviewbot.model`` does)
or import a module here (each user imports the module it needs).
"""
