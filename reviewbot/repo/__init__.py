"""Read-only access to a repository at one commit, and the tools the model may call on it.

``view``: the :class:`~reviewbot.repo.view.RepositoryView` protocol every source implements (a
CI checkout, the host's cached bare clone, GitLab's repository API, or files in memory for
eval datasets and tests).

Owns: the package's layout, nothing else. Must not: import a source or the tools here (each
caller imports the module it needs).
"""
