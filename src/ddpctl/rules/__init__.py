"""One rule per kind of value: the single place that says what a valid name, path, image, quantity... is.

Every rule is a pure function (no I/O, no environment) that takes a value and either returns it (sometimes
normalised, as documented) or raises :class:`RuleError` with a one-line ``problem`` and ``fix``. The spec layer
(:mod:`ddpctl.spec`) applies them once per kind of value, with the key and line of the offending value in front
of the message, so every target (compose, PyTorchJob, TrainJob, Slurm) and ``ddpctl up`` sees only values that
passed; a manifest validator can call the same functions on hand-written files.

The names below are a stable API (other modules import them):

========================== ===============================================================================
``text``                   any string: no NUL, control characters, Unicode line breaks or lone surrogates
``env_name``               ``[A-Za-z_][A-Za-z0-9_]*`` (the whole string; a trailing newline is not allowed)
``user_env_name``          ``env_name`` and not reserved (:data:`RESERVED_ENV`, :data:`RESERVED_ENV_PREFIXES`)
``env_value``              ``text`` that may also carry ``\\n`` and ``\\t``
``shown_name``             the name part of an env entry or secret reference, for an error line (never a value)
``image_ref``              a Docker image reference (distribution/reference grammar), never starting with ``-``
``container_image``        a Slurm container image (pyxis/enroot or apptainer forms), never starting with ``-``
``host_path``              a bind-mount source on the host: no ``:`` ``,`` ``..`` or control characters
``container_path``         an absolute mount target in the container, same characters, not ``/`` or ``/dev/shm``
``dns1123_label``          Kubernetes DNS-1123 label: ``[a-z0-9]([-a-z0-9]*[a-z0-9])?``, at most 63
``dns1123_subdomain``      Kubernetes DNS-1123 subdomain: labels joined by ``.``, at most 253
``dns1035_label``          Kubernetes DNS-1035 label (starts with a letter), at most 63 (or ``max_len``)
``label_key``              Kubernetes label key: ``[prefix/]name``, prefix a subdomain, name at most 63
``label_value``            Kubernetes label value: empty or ``[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?``, at most 63
``int32`` / ``int64``      an integer in the signed 32/64-bit range (and ``lo``..``hi``)
``integer``                an ``int`` (or a decimal string of at most 20 digits) within ``lo``..``hi``
``cpus``                   a finite CPU count, rounded to whole millicores, at least 1m: returns the float
``cpu_quantity``           CPUs as a Kubernetes quantity: ``"2"`` or ``"2500m"``
``size_bytes``             ``16g``/``2Gi``/``512m``/bytes -> a positive int of at most :data:`MAX_BYTES`
``k8s_quantity``           the syntax of a Kubernetes quantity string (``500m``, ``16Gi``, ``1e3``)
``device_id``              a GPU index (normalised: ``"00"`` -> ``"0"``) or a ``GPU-``/``MIG-`` UUID
``toleration``             a Kubernetes toleration mapping (operator, effect, seconds, key, value)
``command``                a user command: non-empty words, the first not starting with ``-``
``host_name``              a host name or IP address, never starting with ``-`` (``--hosts``, Docker hosts)
``docker_host``            ``unix:///PATH``, ``tcp://HOST[:PORT]``, ``ssh://[USER@]HOST[:PORT]`` or a context name
``split_list``             the one way a host list is split: commas and whitespace, blanks dropped
``kubectl_reads``          what kubectl (go-yaml v2) makes of a plain scalar that is not text: ``'a boolean'``...
``needs_quotes``           a string that some YAML reader (kubectl, YAML 1.2) takes as a bool, null or number
========================== ===============================================================================

Input limits for whole files (YAML) are here too (:data:`MAX_SPEC_BYTES`, :data:`MAX_YAML_NODES`,
:data:`MAX_YAML_DEPTH`) with :func:`compose_yaml_bounded`, which turns YAML text into a node tree without
ever expanding aliases beyond those limits. docs/security.md explains why each rule exists.
"""

from __future__ import annotations

from ddpctl.rules.base import (  # noqa: F401
    INT32_MAX,
    INT64_MAX,
    MAX_BYTES,
    MAX_CPUS,
    MAX_ENV_ENTRIES,
    MAX_IMAGE_LEN,
    MAX_INT_DIGITS,
    MAX_PATH_LEN,
    MAX_SCALAR_CHARS,
    MAX_SPEC_BYTES,
    MAX_YAML_DEPTH,
    MAX_YAML_NODES,
    RuleError,
    command,
    text,
)
from ddpctl.rules.env import (  # noqa: F401
    ENV_NAME_RE,
    RESERVED_ENV,
    RESERVED_ENV_PREFIXES,
    env_name,
    env_value,
    reserved_env_fix,
    shown_name,
    user_env_name,
)
from ddpctl.rules.hosts import (  # noqa: F401
    DOCKER_HOST_SCHEMES,
    HOST_RE,
    docker_host,
    host_name,
    split_list,
)
from ddpctl.rules.images import (  # noqa: F401
    MAX_IMAGE_NAME_LEN,
    container_image,
    image_ref,
)
from ddpctl.rules.k8s import (  # noqa: F401
    DNS1035_LABEL_RE,
    TOLERATION_EFFECTS,
    TOLERATION_KEYS,
    TOLERATION_OPERATORS,
    dns1035_label,
    dns1123_label,
    dns1123_subdomain,
    label_key,
    label_value,
    toleration,
)
from ddpctl.rules.numbers import (  # noqa: F401
    cpu_quantity,
    cpus,
    device_id,
    int32,
    int64,
    integer,
    k8s_quantity,
    size_bytes,
)
from ddpctl.rules.paths import (  # noqa: F401
    container_path,
    host_path,
    is_relative_path,
)
from ddpctl.rules.yamlinput import (  # noqa: F401
    compose_yaml_bounded,
    construct_scalar,
)
from ddpctl.rules.yamlscalars import (  # noqa: F401
    kubectl_reads,
    needs_quotes,
)
