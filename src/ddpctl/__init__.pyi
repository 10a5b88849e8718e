# What type checkers and editors see of `import ddpctl` (the module imports each name on first use).
from ddpctl.api.benchmark import Report as Report
from ddpctl.api.benchmark import bench as bench
from ddpctl.api.function_run import RemoteError as RemoteError
from ddpctl.api.function_run import run as run
from ddpctl.api.job_outcome import Outcome as Outcome
from ddpctl.api.job_output import Removed as Removed
from ddpctl.api.job_status import JobStatus as JobStatus
from ddpctl.api.job_status import NodeStatus as NodeStatus
from ddpctl.api.job_status import Progress as Progress
from ddpctl.api.job_status import RankStatus as RankStatus
from ddpctl.api.jobs import Job as Job
from ddpctl.api.jobs import job as job
from ddpctl.api.jobs import jobs as jobs
from ddpctl.api.jobs import up as up
from ddpctl.api.manifests import render as render
from ddpctl.api.manifests import validate as validate
from ddpctl.errors import BadInput as BadInput
from ddpctl.errors import DdpctlError as DdpctlError
from ddpctl.errors import JobFailed as JobFailed

__version__: str
__all__: list[str]
