"""The model server side: capacity planning for vLLM (doctor and loadtest come later).

Everything in this package except the ``*_cli`` modules is pure: data in, data out.
"""
