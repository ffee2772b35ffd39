"""`vault restore docker`: a docker image back into a daemon, verified, from the mirror's archive or a registry.

source (recipes and the archive in the catalog), oci (what a docker save archive holds), fit (the GPU check and
its errors), kernels (--scan-kernels), stream (the verified body docker loads), restore (preflight and restore),
errors. The daemon itself is reached through cloudvault.tools.docker.
"""
