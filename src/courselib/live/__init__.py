"""The real system: the reader's own process, real cgroups, real namespaces, a real local Slurm.

Everything here reads or changes the machine it runs on; everything that changes it cleans up
after itself, and refuses with a :class:`courselib.errors.PrivilegeError` (nothing touched) where
it lacks the privilege.
"""
