"""Generated from the records' fields by `python -m planrun.records_write`: do not edit.

For each record of planrun.records: the function that makes its methods, and the fingerprint of
the fields that function was written from (planrun.records uses it only while they are the same).
"""

# mypy: ignore-errors
# ruff: noqa
# fmt: off

def planrun_errors_Diagnostic(__rec_cls, __rec_defaults, __rec_factories, __rec_factory, __rec_frozen_error):
    def __init__(self, file: 'str', line: 'int', col: 'int', severity: 'str', message: 'str', hint: 'str | None' = __rec_defaults['hint']) -> None:
        __object_setattr = object.__setattr__
        __object_setattr(self, 'file', file)
        __object_setattr(self, 'line', line)
        __object_setattr(self, 'col', col)
        __object_setattr(self, 'severity', severity)
        __object_setattr(self, 'message', message)
        __object_setattr(self, 'hint', hint)
    def __repr__(self):
        return self.__class__.__qualname__ + f"(file={self.file!r}, line={self.line!r}, col={self.col!r}, severity={self.severity!r}, message={self.message!r}, hint={self.hint!r})"
    def __eq__(self, other):
        if other.__class__ is self.__class__:
            return (self.file,self.line,self.col,self.severity,self.message,self.hint,)==(other.file,other.line,other.col,other.severity,other.message,other.hint,)
        return NotImplemented
    def __hash__(self):
        return hash((self.file,self.line,self.col,self.severity,self.message,self.hint,))
    return {'__init__': __init__, '__repr__': __repr__, '__eq__': __eq__, '__hash__': __hash__}

def planrun_plan_definition_Defaults(__rec_cls, __rec_defaults, __rec_factories, __rec_factory, __rec_frozen_error):
    def __init__(self, *, timeout: 'Duration | None' = __rec_defaults['timeout'], retries: 'Count' = __rec_defaults['retries'], retry_delay: 'Duration' = __rec_defaults['retry_delay'], on_failure: 'OnFailure' = __rec_defaults['on_failure']) -> None:
        __object_setattr = object.__setattr__
        __object_setattr(self, 'timeout', timeout)
        __object_setattr(self, 'retries', retries)
        __object_setattr(self, 'retry_delay', retry_delay)
        __object_setattr(self, 'on_failure', on_failure)
    def __repr__(self):
        return self.__class__.__qualname__ + f"(timeout={self.timeout!r}, retries={self.retries!r}, retry_delay={self.retry_delay!r}, on_failure={self.on_failure!r})"
    def __eq__(self, other):
        if other.__class__ is self.__class__:
            return (self.timeout,self.retries,self.retry_delay,self.on_failure,)==(other.timeout,other.retries,other.retry_delay,other.on_failure,)
        return NotImplemented
    def __hash__(self):
        return hash((self.timeout,self.retries,self.retry_delay,self.on_failure,))
    return {'__init__': __init__, '__repr__': __repr__, '__eq__': __eq__, '__hash__': __hash__}

def planrun_plan_definition_ExecutorConfig(__rec_cls, __rec_defaults, __rec_factories, __rec_factory, __rec_frozen_error):
    def __init__(self, *, type: "Literal['local', 'dask']" = __rec_defaults['type'], address: 'str | None' = __rec_defaults['address']) -> None:
        __object_setattr = object.__setattr__
        __object_setattr(self, 'type', type)
        __object_setattr(self, 'address', address)
    def __repr__(self):
        return self.__class__.__qualname__ + f"(type={self.type!r}, address={self.address!r})"
    def __eq__(self, other):
        if other.__class__ is self.__class__:
            return (self.type,self.address,)==(other.type,other.address,)
        return NotImplemented
    def __hash__(self):
        return hash((self.type,self.address,))
    return {'__init__': __init__, '__repr__': __repr__, '__eq__': __eq__, '__hash__': __hash__}

def planrun_plan_definition_Limits(__rec_cls, __rec_defaults, __rec_factories, __rec_factory, __rec_frozen_error):
    def __init__(self, *, max_steps: 'PositiveCount | None' = __rec_defaults['max_steps'], max_replans: 'Count' = __rec_defaults['max_replans'], max_concurrency: 'PositiveCount | None' = __rec_defaults['max_concurrency'], tool_caps: 'dict[str, Count]' = __rec_factory) -> None:
        __object_setattr = object.__setattr__
        __object_setattr(self, 'max_steps', max_steps)
        __object_setattr(self, 'max_replans', max_replans)
        __object_setattr(self, 'max_concurrency', max_concurrency)
        __object_setattr(self, 'tool_caps', __rec_factories['tool_caps']() if tool_caps is __rec_factory else tool_caps)
    def __repr__(self):
        return self.__class__.__qualname__ + f"(max_steps={self.max_steps!r}, max_replans={self.max_replans!r}, max_concurrency={self.max_concurrency!r}, tool_caps={self.tool_caps!r})"
    def __eq__(self, other):
        if other.__class__ is self.__class__:
            return (self.max_steps,self.max_replans,self.max_concurrency,self.tool_caps,)==(other.max_steps,other.max_replans,other.max_concurrency,other.tool_caps,)
        return NotImplemented
    def __hash__(self):
        return hash((self.max_steps,self.max_replans,self.max_concurrency,self.tool_caps,))
    return {'__init__': __init__, '__repr__': __repr__, '__eq__': __eq__, '__hash__': __hash__}

def planrun_plan_definition_Param(__rec_cls, __rec_defaults, __rec_factories, __rec_factory, __rec_frozen_error):
    def __init__(self, *, type: "Annotated[ParamType, Spec(description='What --var VALUE is converted to (default: string).')]" = __rec_defaults['type'], default: "Annotated[Any, Spec(description='The value without --var / --vars-file.')]" = __rec_defaults['default'], required: "Annotated[bool, Spec(description='A run without a value for it is refused (exit 2).')]" = __rec_defaults['required'], choices: "Annotated[list[Any] | None, Spec(description='The only values it may take.', json_schema_extra={'minItems': 1})]" = __rec_defaults['choices'], description: "Annotated[str | None, Spec(description='Shown by `planrun list`.')]" = __rec_defaults['description']) -> None:
        __object_setattr = object.__setattr__
        __object_setattr(self, 'type', type)
        __object_setattr(self, 'default', default)
        __object_setattr(self, 'required', required)
        __object_setattr(self, 'choices', choices)
        __object_setattr(self, 'description', description)
    def __repr__(self):
        return self.__class__.__qualname__ + f"(type={self.type!r}, default={self.default!r}, required={self.required!r}, choices={self.choices!r}, description={self.description!r})"
    def __eq__(self, other):
        if other.__class__ is self.__class__:
            return (self.type,self.default,self.required,self.choices,self.description,)==(other.type,other.default,other.required,other.choices,other.description,)
        return NotImplemented
    def __hash__(self):
        return hash((self.type,self.default,self.required,self.choices,self.description,))
    return {'__init__': __init__, '__repr__': __repr__, '__eq__': __eq__, '__hash__': __hash__}

def planrun_plan_definition_Plan(__rec_cls, __rec_defaults, __rec_factories, __rec_factory, __rec_frozen_error):
    def __init__(self, *, version: 'Version | None' = __rec_defaults['version'], name: "Annotated[str | None, Spec(description='Default: the file stem. Alias: id.')]" = __rec_defaults['name'], title: 'str | None' = __rec_defaults['title'], description: 'str | None' = __rec_defaults['description'], variables: "Annotated[dict[str, Any], Spec(json_schema_extra={'propertyNames': none_of(RESERVED_NAMES)})]" = __rec_factory, servers: 'dict[str, ServerEntry]' = __rec_factory, defaults: 'Defaults' = __rec_factory, limits: 'Limits' = __rec_factory, policy: 'Policy' = __rec_factory, replan: 'Replan | None' = __rec_defaults['replan'], secrets: 'list[str]' = __rec_factory, executor: 'ExecutorConfig | None' = __rec_defaults['executor'], dotenv: 'Annotated[list[str], Spec(description="KEY=VALUE files added to the steps\' environment; a name ending in ? is optional. Names may hold ${...} (variables).")]' = __rec_factory, grace: "Annotated[Duration | None, Spec(description='How long an interrupt waits for running steps to end before killing them (default 10s; --grace overrides).')]" = __rec_defaults['grace'], env: "Annotated[dict[str, str], Spec(description='Environment variables for every run, shell and python step (over dotenv files and the process environment). Values may hold ${...}.')]" = __rec_factory, default: "Annotated[list[StepId] | None, Spec(description='Step ids (or aliases) `planrun run` runs, with what they depend on, when no target is given; without it, every step.')]" = __rec_defaults['default'], params: 'Annotated[dict[str, Param], Spec(description="Variables that are the plan\'s command-line interface (--var NAME=...): typed, with a default, choices, required.", json_schema_extra={\'propertyNames\': {\'pattern\': NAME_PATTERN, **none_of(RESERVED_NAMES)}})]' = __rec_factory, steps: 'list[Step]' = __rec_factory) -> None:
        __object_setattr = object.__setattr__
        __object_setattr(self, 'version', version)
        __object_setattr(self, 'name', name)
        __object_setattr(self, 'title', title)
        __object_setattr(self, 'description', description)
        __object_setattr(self, 'variables', __rec_factories['variables']() if variables is __rec_factory else variables)
        __object_setattr(self, 'servers', __rec_factories['servers']() if servers is __rec_factory else servers)
        __object_setattr(self, 'defaults', __rec_factories['defaults']() if defaults is __rec_factory else defaults)
        __object_setattr(self, 'limits', __rec_factories['limits']() if limits is __rec_factory else limits)
        __object_setattr(self, 'policy', __rec_factories['policy']() if policy is __rec_factory else policy)
        __object_setattr(self, 'replan', replan)
        __object_setattr(self, 'secrets', __rec_factories['secrets']() if secrets is __rec_factory else secrets)
        __object_setattr(self, 'executor', executor)
        __object_setattr(self, 'dotenv', __rec_factories['dotenv']() if dotenv is __rec_factory else dotenv)
        __object_setattr(self, 'grace', grace)
        __object_setattr(self, 'env', __rec_factories['env']() if env is __rec_factory else env)
        __object_setattr(self, 'default', default)
        __object_setattr(self, 'params', __rec_factories['params']() if params is __rec_factory else params)
        __object_setattr(self, 'steps', __rec_factories['steps']() if steps is __rec_factory else steps)
        __object_setattr(self, '_index', __rec_defaults['_index'])
    def __repr__(self):
        return self.__class__.__qualname__ + f"(version={self.version!r}, name={self.name!r}, title={self.title!r}, description={self.description!r}, variables={self.variables!r}, servers={self.servers!r}, defaults={self.defaults!r}, limits={self.limits!r}, policy={self.policy!r}, replan={self.replan!r}, secrets={self.secrets!r}, executor={self.executor!r}, dotenv={self.dotenv!r}, grace={self.grace!r}, env={self.env!r}, default={self.default!r}, params={self.params!r}, steps={self.steps!r})"
    def __eq__(self, other):
        if other.__class__ is self.__class__:
            return (self.version,self.name,self.title,self.description,self.variables,self.servers,self.defaults,self.limits,self.policy,self.replan,self.secrets,self.executor,self.dotenv,self.grace,self.env,self.default,self.params,self.steps,)==(other.version,other.name,other.title,other.description,other.variables,other.servers,other.defaults,other.limits,other.policy,other.replan,other.secrets,other.executor,other.dotenv,other.grace,other.env,other.default,other.params,other.steps,)
        return NotImplemented
    def __hash__(self):
        return hash((self.version,self.name,self.title,self.description,self.variables,self.servers,self.defaults,self.limits,self.policy,self.replan,self.secrets,self.executor,self.dotenv,self.grace,self.env,self.default,self.params,self.steps,))
    return {'__init__': __init__, '__repr__': __repr__, '__eq__': __eq__, '__hash__': __hash__}

def planrun_plan_definition_Policy(__rec_cls, __rec_defaults, __rec_factories, __rec_factory, __rec_frozen_error):
    def __init__(self, *, require_approval: 'list[str]' = __rec_factory, deny: 'list[str]' = __rec_factory) -> None:
        __object_setattr = object.__setattr__
        __object_setattr(self, 'require_approval', __rec_factories['require_approval']() if require_approval is __rec_factory else require_approval)
        __object_setattr(self, 'deny', __rec_factories['deny']() if deny is __rec_factory else deny)
    def __repr__(self):
        return self.__class__.__qualname__ + f"(require_approval={self.require_approval!r}, deny={self.deny!r})"
    def __eq__(self, other):
        if other.__class__ is self.__class__:
            return (self.require_approval,self.deny,)==(other.require_approval,other.deny,)
        return NotImplemented
    def __hash__(self):
        return hash((self.require_approval,self.deny,))
    return {'__init__': __init__, '__repr__': __repr__, '__eq__': __eq__, '__hash__': __hash__}

def planrun_plan_definition_Replan(__rec_cls, __rec_defaults, __rec_factories, __rec_factory, __rec_frozen_error):
    def __init__(self, *, command: 'list[str] | str | None' = __rec_defaults['command'], tool: 'str | None' = __rec_defaults['tool'], timeout: 'Duration' = __rec_defaults['timeout']) -> None:
        __object_setattr = object.__setattr__
        __object_setattr(self, 'command', command)
        __object_setattr(self, 'tool', tool)
        __object_setattr(self, 'timeout', timeout)
    def __repr__(self):
        return self.__class__.__qualname__ + f"(command={self.command!r}, tool={self.tool!r}, timeout={self.timeout!r})"
    def __eq__(self, other):
        if other.__class__ is self.__class__:
            return (self.command,self.tool,self.timeout,)==(other.command,other.tool,other.timeout,)
        return NotImplemented
    def __hash__(self):
        return hash((self.command,self.tool,self.timeout,))
    return {'__init__': __init__, '__repr__': __repr__, '__eq__': __eq__, '__hash__': __hash__}

def planrun_plan_definition_ServerEntry(__rec_cls, __rec_defaults, __rec_factories, __rec_factory, __rec_frozen_error):
    def __init__(self, *, type: "Literal['stdio', 'http', 'sse', 'streamable-http'] | None" = __rec_defaults['type'], command: 'str | None' = __rec_defaults['command'], args: 'list[str]' = __rec_factory, env: 'dict[str, str]' = __rec_factory, cwd: 'str | None' = __rec_defaults['cwd'], envFile: 'str | None' = __rec_defaults['envFile'], url: 'str | None' = __rec_defaults['url'], headers: 'dict[str, str]' = __rec_factory, connect_timeout: "Annotated[Duration | None, Spec(description='planrun: how long the start-up handshake may take (default 20s).')]" = __rec_defaults['connect_timeout']) -> None:
        __object_setattr = object.__setattr__
        __object_setattr(self, 'type', type)
        __object_setattr(self, 'command', command)
        __object_setattr(self, 'args', __rec_factories['args']() if args is __rec_factory else args)
        __object_setattr(self, 'env', __rec_factories['env']() if env is __rec_factory else env)
        __object_setattr(self, 'cwd', cwd)
        __object_setattr(self, 'envFile', envFile)
        __object_setattr(self, 'url', url)
        __object_setattr(self, 'headers', __rec_factories['headers']() if headers is __rec_factory else headers)
        __object_setattr(self, 'connect_timeout', connect_timeout)
    def __repr__(self):
        return self.__class__.__qualname__ + f"(type={self.type!r}, command={self.command!r}, args={self.args!r}, env={self.env!r}, cwd={self.cwd!r}, envFile={self.envFile!r}, url={self.url!r}, headers={self.headers!r}, connect_timeout={self.connect_timeout!r})"
    def __eq__(self, other):
        if other.__class__ is self.__class__:
            return (self.type,self.command,self.args,self.env,self.cwd,self.envFile,self.url,self.headers,self.connect_timeout,)==(other.type,other.command,other.args,other.env,other.cwd,other.envFile,other.url,other.headers,other.connect_timeout,)
        return NotImplemented
    def __hash__(self):
        return hash((self.type,self.command,self.args,self.env,self.cwd,self.envFile,self.url,self.headers,self.connect_timeout,))
    return {'__init__': __init__, '__repr__': __repr__, '__eq__': __eq__, '__hash__': __hash__}

def planrun_plan_definition_Step(__rec_cls, __rec_defaults, __rec_factories, __rec_factory, __rec_frozen_error):
    def __init__(self, *, id: "Annotated[StepId, Spec(description='Unique step id ([A-Za-z0-9_.-]+). Alias: index.')]", title: 'str | None' = __rec_defaults['title'], tool: 'Annotated[str, Spec(description="Built-in tool name, or SERVER.TOOL for an MCP server. A step has \'tool\' or \'run\', not both (\'run\' is tool: shell).", json_schema_extra={\'minLength\': 1})]', args: 'dict[str, Any]' = __rec_factory, depends_on: 'list[StepId]' = __rec_factory, result_variable: 'Annotated[str | None, Spec(pattern=NAME_PATTERN, json_schema_extra=none_of(RESERVED_NAMES))]' = __rec_defaults['result_variable'], when: 'str | bool | None' = __rec_defaults['when'], timeout: 'Duration | None' = __rec_defaults['timeout'], retries: 'Count | None' = __rec_defaults['retries'], retry_delay: 'Duration | None' = __rec_defaults['retry_delay'], on_failure: 'OnFailure | None' = __rec_defaults['on_failure'], expected_outcome: 'str | None' = __rec_defaults['expected_outcome'], approval: 'Annotated[bool | ApprovalText, Spec(description="true: asked with the step\'s title (and command); a text: the question asked.")]' = __rec_defaults['approval'], description: 'str | None' = __rec_defaults['description'], resources: "Annotated[dict[str, float] | None, Spec(description='Dask worker resources this step needs, e.g. {cpu: 2}.')]" = __rec_defaults['resources'], sources: "Annotated[list[SourceGlob] | None, Spec(description='Files the step reads (globs, ** across directories, ! excludes): in its cache key.')]" = __rec_defaults['sources'], outputs: "Annotated[list[OutputGlob] | None, Spec(description='Files the step produces (globs): stored and restored by the cache.')]" = __rec_defaults['outputs'], cache: "Annotated[bool | None, Spec(description='Cache this step (default: true when sources or outputs are given).')]" = __rec_defaults['cache'], foreach: "Annotated[list[Any] | dict[str, Any] | ForeachExpression | None, Spec(description='Run the step once per element: a list, a mapping (elements {key, value}) or one ${expression} giving either. Instances are ID[0], ID[1], ...')]" = __rec_defaults['foreach'], as_: 'Annotated[str | None, Spec(alias=\'as\', pattern=NAME_PATTERN, description="The element\'s name in args, when and title (default: item).", json_schema_extra=none_of(RESERVED_NAMES | {INDEX_NAME}))]' = __rec_defaults['as_'], aliases: 'Annotated[list[StepId], Spec(description="Other names of the step as a target: `planrun run ALIAS`, --only, --force=ALIAS. None may be another step\'s id or alias.")]' = __rec_factory, internal: "Annotated[bool, Spec(description='A helper step: not shown by `list` (`list --all` shows it), refused as a target; runs as a dependency of the steps that need it.')]" = __rec_defaults['internal'], run: "Annotated[str | list[str] | None, Spec(description='A shell step (tool: shell) in short: a string is one script run by /bin/sh -e -c (it stops at its first failing command); a list runs each string by /bin/sh -c in order and stops at the first that fails. ${...} values are quoted for the shell.', json_schema_extra={'not': _BLANK_RUN})]" = __rec_defaults['run'], env: 'Annotated[dict[str, str] | None, Spec(description="Environment variables for a run, shell or python step (over the plan\'s env; a shell step\'s args.env wins). Values may hold ${...}.")]' = __rec_defaults['env'], cwd: 'Annotated[str | None, Spec(description="The directory a run or shell step runs in, and a plan step\'s sub-plan runs in (relative to the working directory; may hold ${...}). The step\'s sources and outputs are relative to it.")]' = __rec_defaults['cwd'], always: "Annotated[bool, Spec(description='Run once every dependency has finished, whatever its status (also after an abort; not after an interrupt). Its failure fails the run.')]" = __rec_defaults['always'], matrix: "Annotated[dict[str, list[Any] | ForeachExpression] | None, Spec(description='Run the step once per combination of these lists (the first name varies slowest), each bound to `matrix` (${matrix.NAME}); `exclude: [{...}]` drops combinations. A list may be one ${expression} giving it. Instances are ID[0], ID[1], ...')]" = __rec_defaults['matrix'], max_parallel: "Annotated[PositiveCount | None, Spec(description='A foreach or matrix step: at most this many instances at once.')]" = __rec_defaults['max_parallel']) -> None:
        __object_setattr = object.__setattr__
        __object_setattr(self, 'id', id)
        __object_setattr(self, 'title', title)
        __object_setattr(self, 'tool', tool)
        __object_setattr(self, 'args', __rec_factories['args']() if args is __rec_factory else args)
        __object_setattr(self, 'depends_on', __rec_factories['depends_on']() if depends_on is __rec_factory else depends_on)
        __object_setattr(self, 'result_variable', result_variable)
        __object_setattr(self, 'when', when)
        __object_setattr(self, 'timeout', timeout)
        __object_setattr(self, 'retries', retries)
        __object_setattr(self, 'retry_delay', retry_delay)
        __object_setattr(self, 'on_failure', on_failure)
        __object_setattr(self, 'expected_outcome', expected_outcome)
        __object_setattr(self, 'approval', approval)
        __object_setattr(self, 'description', description)
        __object_setattr(self, 'resources', resources)
        __object_setattr(self, 'sources', sources)
        __object_setattr(self, 'outputs', outputs)
        __object_setattr(self, 'cache', cache)
        __object_setattr(self, 'foreach', foreach)
        __object_setattr(self, 'as_', as_)
        __object_setattr(self, 'aliases', __rec_factories['aliases']() if aliases is __rec_factory else aliases)
        __object_setattr(self, 'internal', internal)
        __object_setattr(self, 'run', run)
        __object_setattr(self, 'env', env)
        __object_setattr(self, 'cwd', cwd)
        __object_setattr(self, 'always', always)
        __object_setattr(self, 'matrix', matrix)
        __object_setattr(self, 'max_parallel', max_parallel)
    def __repr__(self):
        return self.__class__.__qualname__ + f"(id={self.id!r}, title={self.title!r}, tool={self.tool!r}, args={self.args!r}, depends_on={self.depends_on!r}, result_variable={self.result_variable!r}, when={self.when!r}, timeout={self.timeout!r}, retries={self.retries!r}, retry_delay={self.retry_delay!r}, on_failure={self.on_failure!r}, expected_outcome={self.expected_outcome!r}, approval={self.approval!r}, description={self.description!r}, resources={self.resources!r}, sources={self.sources!r}, outputs={self.outputs!r}, cache={self.cache!r}, foreach={self.foreach!r}, as_={self.as_!r}, aliases={self.aliases!r}, internal={self.internal!r}, run={self.run!r}, env={self.env!r}, cwd={self.cwd!r}, always={self.always!r}, matrix={self.matrix!r}, max_parallel={self.max_parallel!r})"
    def __eq__(self, other):
        if other.__class__ is self.__class__:
            return (self.id,self.title,self.tool,self.args,self.depends_on,self.result_variable,self.when,self.timeout,self.retries,self.retry_delay,self.on_failure,self.expected_outcome,self.approval,self.description,self.resources,self.sources,self.outputs,self.cache,self.foreach,self.as_,self.aliases,self.internal,self.run,self.env,self.cwd,self.always,self.matrix,self.max_parallel,)==(other.id,other.title,other.tool,other.args,other.depends_on,other.result_variable,other.when,other.timeout,other.retries,other.retry_delay,other.on_failure,other.expected_outcome,other.approval,other.description,other.resources,other.sources,other.outputs,other.cache,other.foreach,other.as_,other.aliases,other.internal,other.run,other.env,other.cwd,other.always,other.matrix,other.max_parallel,)
        return NotImplemented
    def __hash__(self):
        return hash((self.id,self.title,self.tool,self.args,self.depends_on,self.result_variable,self.when,self.timeout,self.retries,self.retry_delay,self.on_failure,self.expected_outcome,self.approval,self.description,self.resources,self.sources,self.outputs,self.cache,self.foreach,self.as_,self.aliases,self.internal,self.run,self.env,self.cwd,self.always,self.matrix,self.max_parallel,))
    return {'__init__': __init__, '__repr__': __repr__, '__eq__': __eq__, '__hash__': __hash__}

def planrun_plan_expressions_Expr(__rec_cls, __rec_defaults, __rec_factories, __rec_factory, __rec_frozen_error):
    def __init__(self, source: 'str', names: 'frozenset[str]', step_refs: 'frozenset[str]', ref: 'tuple[str, tuple[str | int, ...]] | None', steps_dynamic: 'bool' = __rec_defaults['steps_dynamic']) -> None:
        __object_setattr = object.__setattr__
        __object_setattr(self, 'source', source)
        __object_setattr(self, 'names', names)
        __object_setattr(self, 'step_refs', step_refs)
        __object_setattr(self, 'ref', ref)
        __object_setattr(self, 'steps_dynamic', steps_dynamic)
    def __repr__(self):
        return self.__class__.__qualname__ + f"(source={self.source!r}, names={self.names!r}, step_refs={self.step_refs!r}, ref={self.ref!r}, steps_dynamic={self.steps_dynamic!r})"
    def __eq__(self, other):
        if other.__class__ is self.__class__:
            return (self.source,self.names,self.step_refs,self.ref,self.steps_dynamic,)==(other.source,other.names,other.step_refs,other.ref,other.steps_dynamic,)
        return NotImplemented
    def __hash__(self):
        return hash((self.source,self.names,self.step_refs,self.ref,self.steps_dynamic,))
    return {'__init__': __init__, '__repr__': __repr__, '__eq__': __eq__, '__hash__': __hash__}

def planrun_plan_expressions_Template(__rec_cls, __rec_defaults, __rec_factories, __rec_factory, __rec_frozen_error):
    def __init__(self, parts: 'tuple[str | Expr, ...]') -> None:
        __object_setattr = object.__setattr__
        __object_setattr(self, 'parts', parts)
    def __repr__(self):
        return self.__class__.__qualname__ + f"(parts={self.parts!r})"
    def __eq__(self, other):
        if other.__class__ is self.__class__:
            return (self.parts,)==(other.parts,)
        return NotImplemented
    def __hash__(self):
        return hash((self.parts,))
    return {'__init__': __init__, '__repr__': __repr__, '__eq__': __eq__, '__hash__': __hash__}

def planrun_run_context_ChildContext(__rec_cls, __rec_defaults, __rec_factories, __rec_factory, __rec_frozen_error):
    def __init__(self, request: 'RunRequest', prefix: 'str', stack: 'tuple[str, ...]', yes: 'bool', can_ask: 'bool', forced: 'tuple[str, ...]' = __rec_defaults['forced'], *, parent: 'ParentContext', step_id: 'str') -> None:
        __object_setattr = object.__setattr__
        __object_setattr(self, 'request', request)
        __object_setattr(self, 'prefix', prefix)
        __object_setattr(self, 'stack', stack)
        __object_setattr(self, 'yes', yes)
        __object_setattr(self, 'can_ask', can_ask)
        __object_setattr(self, 'forced', forced)
        __object_setattr(self, 'parent', parent)
        __object_setattr(self, 'step_id', step_id)
    def __repr__(self):
        return self.__class__.__qualname__ + f"(request={self.request!r}, prefix={self.prefix!r}, stack={self.stack!r}, yes={self.yes!r}, can_ask={self.can_ask!r}, forced={self.forced!r}, parent={self.parent!r}, step_id={self.step_id!r})"
    def __eq__(self, other):
        if other.__class__ is self.__class__:
            return (self.request,self.prefix,self.stack,self.yes,self.can_ask,self.forced,self.parent,self.step_id,)==(other.request,other.prefix,other.stack,other.yes,other.can_ask,other.forced,other.parent,other.step_id,)
        return NotImplemented
    def __hash__(self):
        return hash((self.request,self.prefix,self.stack,self.yes,self.can_ask,self.forced,self.parent,self.step_id,))
    return {'__init__': __init__, '__repr__': __repr__, '__eq__': __eq__, '__hash__': __hash__}

def planrun_run_context_RunContext(__rec_cls, __rec_defaults, __rec_factories, __rec_factory, __rec_frozen_error):
    def __init__(self, request: 'RunRequest', prefix: 'str', stack: 'tuple[str, ...]', yes: 'bool', can_ask: 'bool', forced: 'tuple[str, ...]' = __rec_defaults['forced']) -> None:
        __object_setattr = object.__setattr__
        __object_setattr(self, 'request', request)
        __object_setattr(self, 'prefix', prefix)
        __object_setattr(self, 'stack', stack)
        __object_setattr(self, 'yes', yes)
        __object_setattr(self, 'can_ask', can_ask)
        __object_setattr(self, 'forced', forced)
    def __repr__(self):
        return self.__class__.__qualname__ + f"(request={self.request!r}, prefix={self.prefix!r}, stack={self.stack!r}, yes={self.yes!r}, can_ask={self.can_ask!r}, forced={self.forced!r})"
    def __eq__(self, other):
        if other.__class__ is self.__class__:
            return (self.request,self.prefix,self.stack,self.yes,self.can_ask,self.forced,)==(other.request,other.prefix,other.stack,other.yes,other.can_ask,other.forced,)
        return NotImplemented
    def __hash__(self):
        return hash((self.request,self.prefix,self.stack,self.yes,self.can_ask,self.forced,))
    return {'__init__': __init__, '__repr__': __repr__, '__eq__': __eq__, '__hash__': __hash__}

def planrun_run_request_RunRequest(__rec_cls, __rec_defaults, __rec_factories, __rec_factory, __rec_frozen_error):
    def __init__(self, plan: 'str', text: 'str | None' = __rec_defaults['text'], variables: 'dict[str, Any]' = __rec_factory, vars_file: 'str | None' = __rec_defaults['vars_file'], jobs: 'int | None' = __rec_defaults['jobs'], state: 'str | None' = __rec_defaults['state'], no_state: 'bool' = __rec_defaults['no_state'], resume: 'bool' = __rec_defaults['resume'], keep_going: 'bool' = __rec_defaults['keep_going'], yes: 'bool' = __rec_defaults['yes'], only: 'list[str]' = __rec_factory, dry_run: 'bool' = __rec_defaults['dry_run'], output: 'str' = __rec_defaults['output'], events: 'str | None' = __rec_defaults['events'], junit: 'str | None' = __rec_defaults['junit'], report: 'str | None' = __rec_defaults['report'], quiet: 'bool' = __rec_defaults['quiet'], stream: 'bool' = __rec_defaults['stream'], executor: 'str | None' = __rec_defaults['executor'], address: 'str | None' = __rec_defaults['address'], planner: 'str | None' = __rec_defaults['planner'], mcp_config: 'str | None' = __rec_defaults['mcp_config'], force: 'list[str]' = __rec_factory, no_cache: 'bool' = __rec_defaults['no_cache'], cache_dir: 'str | None' = __rec_defaults['cache_dir'], explain: 'bool' = __rec_defaults['explain'], remote_cache: 'str | None' = __rec_defaults['remote_cache'], remote_cache_read_only: 'bool' = __rec_defaults['remote_cache_read_only'], remote_cache_timeout: 'str | None' = __rec_defaults['remote_cache_timeout'], cwd: 'str' = __rec_factory, interactive: 'bool' = __rec_defaults['interactive'], console: 'bool' = __rec_defaults['console'], subscribers: 'list[Callable[[RunEvent], None]]' = __rec_factory, start_hint: 'str | None' = __rec_defaults['start_hint'], grace: 'float | None' = __rec_defaults['grace'], groups: 'ProcessGroups | None' = __rec_defaults['groups'], report_failures: 'WriteFailures' = __rec_factory, params_required: 'bool' = __rec_defaults['params_required'], internal_targets: 'bool' = __rec_defaults['internal_targets'], environ: 'dict[str, str] | None' = __rec_defaults['environ'], plan_found: 'bool' = __rec_defaults['plan_found'], directories: 'tuple[str, ...]' = __rec_defaults['directories']) -> None:
        self.plan = plan
        self.text = text
        self.variables = __rec_factories['variables']() if variables is __rec_factory else variables
        self.vars_file = vars_file
        self.jobs = jobs
        self.state = state
        self.no_state = no_state
        self.resume = resume
        self.keep_going = keep_going
        self.yes = yes
        self.only = __rec_factories['only']() if only is __rec_factory else only
        self.dry_run = dry_run
        self.output = output
        self.events = events
        self.junit = junit
        self.report = report
        self.quiet = quiet
        self.stream = stream
        self.executor = executor
        self.address = address
        self.planner = planner
        self.mcp_config = mcp_config
        self.force = __rec_factories['force']() if force is __rec_factory else force
        self.no_cache = no_cache
        self.cache_dir = cache_dir
        self.explain = explain
        self.remote_cache = remote_cache
        self.remote_cache_read_only = remote_cache_read_only
        self.remote_cache_timeout = remote_cache_timeout
        self.cwd = __rec_factories['cwd']() if cwd is __rec_factory else cwd
        self.interactive = interactive
        self.console = console
        self.subscribers = __rec_factories['subscribers']() if subscribers is __rec_factory else subscribers
        self.start_hint = start_hint
        self.grace = grace
        self.groups = groups
        self.report_failures = __rec_factories['report_failures']() if report_failures is __rec_factory else report_failures
        self.params_required = params_required
        self.internal_targets = internal_targets
        self.environ = environ
        self.plan_found = plan_found
        self.directories = directories
    def __repr__(self):
        return self.__class__.__qualname__ + f"(plan={self.plan!r}, text={self.text!r}, variables={self.variables!r}, vars_file={self.vars_file!r}, jobs={self.jobs!r}, state={self.state!r}, no_state={self.no_state!r}, resume={self.resume!r}, keep_going={self.keep_going!r}, yes={self.yes!r}, only={self.only!r}, dry_run={self.dry_run!r}, output={self.output!r}, events={self.events!r}, junit={self.junit!r}, report={self.report!r}, quiet={self.quiet!r}, stream={self.stream!r}, executor={self.executor!r}, address={self.address!r}, planner={self.planner!r}, mcp_config={self.mcp_config!r}, force={self.force!r}, no_cache={self.no_cache!r}, cache_dir={self.cache_dir!r}, explain={self.explain!r}, remote_cache={self.remote_cache!r}, remote_cache_read_only={self.remote_cache_read_only!r}, remote_cache_timeout={self.remote_cache_timeout!r}, cwd={self.cwd!r}, interactive={self.interactive!r}, console={self.console!r}, subscribers={self.subscribers!r}, start_hint={self.start_hint!r}, grace={self.grace!r}, groups={self.groups!r}, report_failures={self.report_failures!r}, params_required={self.params_required!r}, internal_targets={self.internal_targets!r}, environ={self.environ!r}, plan_found={self.plan_found!r}, directories={self.directories!r})"
    def __eq__(self, other):
        if other.__class__ is self.__class__:
            return (self.plan,self.text,self.variables,self.vars_file,self.jobs,self.state,self.no_state,self.resume,self.keep_going,self.yes,self.only,self.dry_run,self.output,self.events,self.junit,self.report,self.quiet,self.stream,self.executor,self.address,self.planner,self.mcp_config,self.force,self.no_cache,self.cache_dir,self.explain,self.remote_cache,self.remote_cache_read_only,self.remote_cache_timeout,self.cwd,self.interactive,self.console,self.subscribers,self.start_hint,self.grace,self.groups,self.report_failures,self.params_required,self.internal_targets,self.environ,self.plan_found,self.directories,)==(other.plan,other.text,other.variables,other.vars_file,other.jobs,other.state,other.no_state,other.resume,other.keep_going,other.yes,other.only,other.dry_run,other.output,other.events,other.junit,other.report,other.quiet,other.stream,other.executor,other.address,other.planner,other.mcp_config,other.force,other.no_cache,other.cache_dir,other.explain,other.remote_cache,other.remote_cache_read_only,other.remote_cache_timeout,other.cwd,other.interactive,other.console,other.subscribers,other.start_hint,other.grace,other.groups,other.report_failures,other.params_required,other.internal_targets,other.environ,other.plan_found,other.directories,)
        return NotImplemented
    return {'__init__': __init__, '__repr__': __repr__, '__eq__': __eq__}

def planrun_run_scope_StepRecord(__rec_cls, __rec_defaults, __rec_factories, __rec_factory, __rec_frozen_error):
    def __init__(self, status: 'Status' = __rec_defaults['status'], attempts: 'int' = __rec_defaults['attempts'], result: 'Any' = __rec_defaults['result'], error: 'str | None' = __rec_defaults['error'], duration_s: 'float | None' = __rec_defaults['duration_s'], fingerprint: 'str | None' = __rec_defaults['fingerprint'], kept: 'bool' = __rec_defaults['kept'], upstream_failed: 'bool' = __rec_defaults['upstream_failed'], result_masked: 'bool' = __rec_defaults['result_masked'], reason: 'str | None' = __rec_defaults['reason'], cache_key: 'str | None' = __rec_defaults['cache_key']) -> None:
        self.status = status
        self.attempts = attempts
        self.result = result
        self.error = error
        self.duration_s = duration_s
        self.fingerprint = fingerprint
        self.kept = kept
        self.upstream_failed = upstream_failed
        self.result_masked = result_masked
        self.reason = reason
        self.cache_key = cache_key
    def __repr__(self):
        return self.__class__.__qualname__ + f"(status={self.status!r}, attempts={self.attempts!r}, result={self.result!r}, error={self.error!r}, duration_s={self.duration_s!r}, fingerprint={self.fingerprint!r}, kept={self.kept!r}, upstream_failed={self.upstream_failed!r}, result_masked={self.result_masked!r}, reason={self.reason!r}, cache_key={self.cache_key!r})"
    def __eq__(self, other):
        if other.__class__ is self.__class__:
            return (self.status,self.attempts,self.result,self.error,self.duration_s,self.fingerprint,self.kept,self.upstream_failed,self.result_masked,self.reason,self.cache_key,)==(other.status,other.attempts,other.result,other.error,other.duration_s,other.fingerprint,other.kept,other.upstream_failed,other.result_masked,other.reason,other.cache_key,)
        return NotImplemented
    return {'__init__': __init__, '__repr__': __repr__, '__eq__': __eq__}

def planrun_state_model_RunState(__rec_cls, __rec_defaults, __rec_factories, __rec_factory, __rec_frozen_error):
    def __init__(self, plan: 'str', version: 'int' = __rec_defaults['version'], digest: 'str | None' = __rec_defaults['digest'], run_id: 'str | None' = __rec_defaults['run_id'], status: 'str' = __rec_defaults['status'], reason: 'str | None' = __rec_defaults['reason'], error: 'str | None' = __rec_defaults['error'], started_at: 'str | None' = __rec_defaults['started_at'], ended_at: 'str | None' = __rec_defaults['ended_at'], duration_s: 'float | None' = __rec_defaults['duration_s'], variables: 'dict[str, Any]' = __rec_factory, steps: 'dict[str, StepState]' = __rec_factory, revisions: 'list[dict[str, Any]]' = __rec_factory, pid: 'int | None' = __rec_defaults['pid'], jobs: 'int | None' = __rec_defaults['jobs'], targets: 'list[str] | None' = __rec_defaults['targets']) -> None:
        self.plan = plan
        self.version = version
        self.digest = digest
        self.run_id = run_id
        self.status = status
        self.reason = reason
        self.error = error
        self.started_at = started_at
        self.ended_at = ended_at
        self.duration_s = duration_s
        self.variables = __rec_factories['variables']() if variables is __rec_factory else variables
        self.steps = __rec_factories['steps']() if steps is __rec_factory else steps
        self.revisions = __rec_factories['revisions']() if revisions is __rec_factory else revisions
        self.pid = pid
        self.jobs = jobs
        self.targets = targets
    def __repr__(self):
        return self.__class__.__qualname__ + f"(plan={self.plan!r}, version={self.version!r}, digest={self.digest!r}, run_id={self.run_id!r}, status={self.status!r}, reason={self.reason!r}, error={self.error!r}, started_at={self.started_at!r}, ended_at={self.ended_at!r}, duration_s={self.duration_s!r}, variables={self.variables!r}, steps={self.steps!r}, revisions={self.revisions!r}, pid={self.pid!r}, jobs={self.jobs!r}, targets={self.targets!r})"
    def __eq__(self, other):
        if other.__class__ is self.__class__:
            return (self.plan,self.version,self.digest,self.run_id,self.status,self.reason,self.error,self.started_at,self.ended_at,self.duration_s,self.variables,self.steps,self.revisions,self.pid,self.jobs,self.targets,)==(other.plan,other.version,other.digest,other.run_id,other.status,other.reason,other.error,other.started_at,other.ended_at,other.duration_s,other.variables,other.steps,other.revisions,other.pid,other.jobs,other.targets,)
        return NotImplemented
    return {'__init__': __init__, '__repr__': __repr__, '__eq__': __eq__}

def planrun_state_model_StepState(__rec_cls, __rec_defaults, __rec_factories, __rec_factory, __rec_frozen_error):
    def __init__(self, status: 'str' = __rec_defaults['status'], attempts: 'int' = __rec_defaults['attempts'], result: 'Any' = __rec_defaults['result'], error: 'str | None' = __rec_defaults['error'], started_at: 'str | None' = __rec_defaults['started_at'], ended_at: 'str | None' = __rec_defaults['ended_at'], duration_s: 'float | None' = __rec_defaults['duration_s'], fingerprint: 'str | None' = __rec_defaults['fingerprint'], result_variable: 'str | None' = __rec_defaults['result_variable'], reason: 'str | None' = __rec_defaults['reason'], detail: 'str | None' = __rec_defaults['detail'], title: 'str | None' = __rec_defaults['title'], result_masked: 'bool' = __rec_defaults['result_masked'], cache_key: 'str | None' = __rec_defaults['cache_key'], kept: 'bool' = __rec_defaults['kept'], attempts_log: 'list[dict[str, Any]]' = __rec_factory) -> None:
        self.status = status
        self.attempts = attempts
        self.result = result
        self.error = error
        self.started_at = started_at
        self.ended_at = ended_at
        self.duration_s = duration_s
        self.fingerprint = fingerprint
        self.result_variable = result_variable
        self.reason = reason
        self.detail = detail
        self.title = title
        self.result_masked = result_masked
        self.cache_key = cache_key
        self.kept = kept
        self.attempts_log = __rec_factories['attempts_log']() if attempts_log is __rec_factory else attempts_log
    def __repr__(self):
        return self.__class__.__qualname__ + f"(status={self.status!r}, attempts={self.attempts!r}, result={self.result!r}, error={self.error!r}, started_at={self.started_at!r}, ended_at={self.ended_at!r}, duration_s={self.duration_s!r}, fingerprint={self.fingerprint!r}, result_variable={self.result_variable!r}, reason={self.reason!r}, detail={self.detail!r}, title={self.title!r}, result_masked={self.result_masked!r}, cache_key={self.cache_key!r}, kept={self.kept!r}, attempts_log={self.attempts_log!r})"
    def __eq__(self, other):
        if other.__class__ is self.__class__:
            return (self.status,self.attempts,self.result,self.error,self.started_at,self.ended_at,self.duration_s,self.fingerprint,self.result_variable,self.reason,self.detail,self.title,self.result_masked,self.cache_key,self.kept,self.attempts_log,)==(other.status,other.attempts,other.result,other.error,other.started_at,other.ended_at,other.duration_s,other.fingerprint,other.result_variable,other.reason,other.detail,other.title,other.result_masked,other.cache_key,other.kept,other.attempts_log,)
        return NotImplemented
    return {'__init__': __init__, '__repr__': __repr__, '__eq__': __eq__}

def planrun_tools_base_Services(__rec_cls, __rec_defaults, __rec_factories, __rec_factory, __rec_frozen_error):
    def __init__(self, mcp: 'ToolPool | None' = __rec_defaults['mcp'], notice: 'Notice | None' = __rec_defaults['notice'], dotenv: 'Mapping[str, str]' = __rec_factory, groups: 'ProcessGroups | None' = __rec_defaults['groups']) -> None:
        __object_setattr = object.__setattr__
        __object_setattr(self, 'mcp', mcp)
        __object_setattr(self, 'notice', notice)
        __object_setattr(self, 'dotenv', __rec_factories['dotenv']() if dotenv is __rec_factory else dotenv)
        __object_setattr(self, 'groups', groups)
    def __repr__(self):
        return self.__class__.__qualname__ + f"(mcp={self.mcp!r}, notice={self.notice!r}, dotenv={self.dotenv!r}, groups={self.groups!r})"
    def __eq__(self, other):
        if other.__class__ is self.__class__:
            return (self.mcp,self.notice,self.dotenv,self.groups,)==(other.mcp,other.notice,other.dotenv,other.groups,)
        return NotImplemented
    def __hash__(self):
        return hash((self.mcp,self.notice,self.dotenv,self.groups,))
    return {'__init__': __init__, '__repr__': __repr__, '__eq__': __eq__, '__hash__': __hash__}

MAKERS = {
    'planrun.errors.Diagnostic': ((True, True, False, (('file', 'str', False, False, True, True, True, None, False), ('line', 'int', False, False, True, True, True, None, False), ('col', 'int', False, False, True, True, True, None, False), ('severity', 'str', False, False, True, True, True, None, False), ('message', 'str', False, False, True, True, True, None, False), ('hint', 'str | None', True, False, True, True, True, None, False))), planrun_errors_Diagnostic, None),
    'planrun.plan.definition.Defaults': ((True, False, False, (('timeout', 'Duration | None', True, False, True, True, True, None, True), ('retries', 'Count', True, False, True, True, True, None, True), ('retry_delay', 'Duration', True, False, True, True, True, None, True), ('on_failure', 'OnFailure', True, False, True, True, True, None, True))), planrun_plan_definition_Defaults, "Defaults(*, timeout: 'Duration | None' = None, retries: 'Count' = 0, retry_delay: 'Duration' = 1.0, on_failure: 'OnFailure' = <OnFailure.abort: 'abort'>)"),
    'planrun.plan.definition.ExecutorConfig': ((True, False, False, (('type', "Literal['local', 'dask']", True, False, True, True, True, None, True), ('address', 'str | None', True, False, True, True, True, None, True))), planrun_plan_definition_ExecutorConfig, 'ExecutorConfig(*, type: "Literal[\'local\', \'dask\']" = \'local\', address: \'str | None\' = None)'),
    'planrun.plan.definition.Limits': ((True, False, False, (('max_steps', 'PositiveCount | None', True, False, True, True, True, None, True), ('max_replans', 'Count', True, False, True, True, True, None, True), ('max_concurrency', 'PositiveCount | None', True, False, True, True, True, None, True), ('tool_caps', 'dict[str, Count]', False, True, True, True, True, None, True))), planrun_plan_definition_Limits, "Limits(*, max_steps: 'PositiveCount | None' = None, max_replans: 'Count' = 2, max_concurrency: 'PositiveCount | None' = None, tool_caps: 'dict[str, Count]' = <factory>)"),
    'planrun.plan.definition.Param': ((True, True, False, (('type', "Annotated[ParamType, Spec(description='What --var VALUE is converted to (default: string).')]", True, False, True, True, True, None, True), ('default', "Annotated[Any, Spec(description='The value without --var / --vars-file.')]", True, False, True, True, True, None, True), ('required', "Annotated[bool, Spec(description='A run without a value for it is refused (exit 2).')]", True, False, True, True, True, None, True), ('choices', "Annotated[list[Any] | None, Spec(description='The only values it may take.', json_schema_extra={'minItems': 1})]", True, False, True, True, True, None, True), ('description', "Annotated[str | None, Spec(description='Shown by `planrun list`.')]", True, False, True, True, True, None, True))), planrun_plan_definition_Param, None),
    'planrun.plan.definition.Plan': ((True, True, False, (('version', 'Version | None', True, False, True, True, True, None, True), ('name', "Annotated[str | None, Spec(description='Default: the file stem. Alias: id.')]", True, False, True, True, True, None, True), ('title', 'str | None', True, False, True, True, True, None, True), ('description', 'str | None', True, False, True, True, True, None, True), ('variables', "Annotated[dict[str, Any], Spec(json_schema_extra={'propertyNames': none_of(RESERVED_NAMES)})]", False, True, True, True, True, None, True), ('servers', 'dict[str, ServerEntry]', False, True, True, True, True, None, True), ('defaults', 'Defaults', False, True, True, True, True, None, True), ('limits', 'Limits', False, True, True, True, True, None, True), ('policy', 'Policy', False, True, True, True, True, None, True), ('replan', 'Replan | None', True, False, True, True, True, None, True), ('secrets', 'list[str]', False, True, True, True, True, None, True), ('executor', 'ExecutorConfig | None', True, False, True, True, True, None, True), ('dotenv', 'Annotated[list[str], Spec(description="KEY=VALUE files added to the steps\' environment; a name ending in ? is optional. Names may hold ${...} (variables).")]', False, True, True, True, True, None, True), ('grace', "Annotated[Duration | None, Spec(description='How long an interrupt waits for running steps to end before killing them (default 10s; --grace overrides).')]", True, False, True, True, True, None, True), ('env', "Annotated[dict[str, str], Spec(description='Environment variables for every run, shell and python step (over dotenv files and the process environment). Values may hold ${...}.')]", False, True, True, True, True, None, True), ('default', "Annotated[list[StepId] | None, Spec(description='Step ids (or aliases) `planrun run` runs, with what they depend on, when no target is given; without it, every step.')]", True, False, True, True, True, None, True), ('params', 'Annotated[dict[str, Param], Spec(description="Variables that are the plan\'s command-line interface (--var NAME=...): typed, with a default, choices, required.", json_schema_extra={\'propertyNames\': {\'pattern\': NAME_PATTERN, **none_of(RESERVED_NAMES)}})]', False, True, True, True, True, None, True), ('steps', 'list[Step]', False, True, True, True, True, None, True), ('_index', 'dict[str, Step] | None', True, False, False, False, False, None, True))), planrun_plan_definition_Plan, None),
    'planrun.plan.definition.Policy': ((True, False, False, (('require_approval', 'list[str]', False, True, True, True, True, None, True), ('deny', 'list[str]', False, True, True, True, True, None, True))), planrun_plan_definition_Policy, "Policy(*, require_approval: 'list[str]' = <factory>, deny: 'list[str]' = <factory>)"),
    'planrun.plan.definition.Replan': ((True, False, False, (('command', 'list[str] | str | None', True, False, True, True, True, None, True), ('tool', 'str | None', True, False, True, True, True, None, True), ('timeout', 'Duration', True, False, True, True, True, None, True))), planrun_plan_definition_Replan, "Replan(*, command: 'list[str] | str | None' = None, tool: 'str | None' = None, timeout: 'Duration' = 60.0)"),
    'planrun.plan.definition.ServerEntry': ((True, True, False, (('type', "Literal['stdio', 'http', 'sse', 'streamable-http'] | None", True, False, True, True, True, None, True), ('command', 'str | None', True, False, True, True, True, None, True), ('args', 'list[str]', False, True, True, True, True, None, True), ('env', 'dict[str, str]', False, True, True, True, True, None, True), ('cwd', 'str | None', True, False, True, True, True, None, True), ('envFile', 'str | None', True, False, True, True, True, None, True), ('url', 'str | None', True, False, True, True, True, None, True), ('headers', 'dict[str, str]', False, True, True, True, True, None, True), ('connect_timeout', "Annotated[Duration | None, Spec(description='planrun: how long the start-up handshake may take (default 20s).')]", True, False, True, True, True, None, True))), planrun_plan_definition_ServerEntry, None),
    'planrun.plan.definition.Step': ((True, True, False, (('id', "Annotated[StepId, Spec(description='Unique step id ([A-Za-z0-9_.-]+). Alias: index.')]", False, False, True, True, True, None, True), ('title', 'str | None', True, False, True, True, True, None, True), ('tool', 'Annotated[str, Spec(description="Built-in tool name, or SERVER.TOOL for an MCP server. A step has \'tool\' or \'run\', not both (\'run\' is tool: shell).", json_schema_extra={\'minLength\': 1})]', False, False, True, True, True, None, True), ('args', 'dict[str, Any]', False, True, True, True, True, None, True), ('depends_on', 'list[StepId]', False, True, True, True, True, None, True), ('result_variable', 'Annotated[str | None, Spec(pattern=NAME_PATTERN, json_schema_extra=none_of(RESERVED_NAMES))]', True, False, True, True, True, None, True), ('when', 'str | bool | None', True, False, True, True, True, None, True), ('timeout', 'Duration | None', True, False, True, True, True, None, True), ('retries', 'Count | None', True, False, True, True, True, None, True), ('retry_delay', 'Duration | None', True, False, True, True, True, None, True), ('on_failure', 'OnFailure | None', True, False, True, True, True, None, True), ('expected_outcome', 'str | None', True, False, True, True, True, None, True), ('approval', 'Annotated[bool | ApprovalText, Spec(description="true: asked with the step\'s title (and command); a text: the question asked.")]', True, False, True, True, True, None, True), ('description', 'str | None', True, False, True, True, True, None, True), ('resources', "Annotated[dict[str, float] | None, Spec(description='Dask worker resources this step needs, e.g. {cpu: 2}.')]", True, False, True, True, True, None, True), ('sources', "Annotated[list[SourceGlob] | None, Spec(description='Files the step reads (globs, ** across directories, ! excludes): in its cache key.')]", True, False, True, True, True, None, True), ('outputs', "Annotated[list[OutputGlob] | None, Spec(description='Files the step produces (globs): stored and restored by the cache.')]", True, False, True, True, True, None, True), ('cache', "Annotated[bool | None, Spec(description='Cache this step (default: true when sources or outputs are given).')]", True, False, True, True, True, None, True), ('foreach', "Annotated[list[Any] | dict[str, Any] | ForeachExpression | None, Spec(description='Run the step once per element: a list, a mapping (elements {key, value}) or one ${expression} giving either. Instances are ID[0], ID[1], ...')]", True, False, True, True, True, None, True), ('as_', 'Annotated[str | None, Spec(alias=\'as\', pattern=NAME_PATTERN, description="The element\'s name in args, when and title (default: item).", json_schema_extra=none_of(RESERVED_NAMES | {INDEX_NAME}))]', True, False, True, True, True, None, True), ('aliases', 'Annotated[list[StepId], Spec(description="Other names of the step as a target: `planrun run ALIAS`, --only, --force=ALIAS. None may be another step\'s id or alias.")]', False, True, True, True, True, None, True), ('internal', "Annotated[bool, Spec(description='A helper step: not shown by `list` (`list --all` shows it), refused as a target; runs as a dependency of the steps that need it.')]", True, False, True, True, True, None, True), ('run', "Annotated[str | list[str] | None, Spec(description='A shell step (tool: shell) in short: a string is one script run by /bin/sh -e -c (it stops at its first failing command); a list runs each string by /bin/sh -c in order and stops at the first that fails. ${...} values are quoted for the shell.', json_schema_extra={'not': _BLANK_RUN})]", True, False, True, True, True, None, True), ('env', 'Annotated[dict[str, str] | None, Spec(description="Environment variables for a run, shell or python step (over the plan\'s env; a shell step\'s args.env wins). Values may hold ${...}.")]', True, False, True, True, True, None, True), ('cwd', 'Annotated[str | None, Spec(description="The directory a run or shell step runs in, and a plan step\'s sub-plan runs in (relative to the working directory; may hold ${...}). The step\'s sources and outputs are relative to it.")]', True, False, True, True, True, None, True), ('always', "Annotated[bool, Spec(description='Run once every dependency has finished, whatever its status (also after an abort; not after an interrupt). Its failure fails the run.')]", True, False, True, True, True, None, True), ('matrix', "Annotated[dict[str, list[Any] | ForeachExpression] | None, Spec(description='Run the step once per combination of these lists (the first name varies slowest), each bound to `matrix` (${matrix.NAME}); `exclude: [{...}]` drops combinations. A list may be one ${expression} giving it. Instances are ID[0], ID[1], ...')]", True, False, True, True, True, None, True), ('max_parallel', "Annotated[PositiveCount | None, Spec(description='A foreach or matrix step: at most this many instances at once.')]", True, False, True, True, True, None, True))), planrun_plan_definition_Step, None),
    'planrun.plan.expressions.Expr': ((True, True, False, (('source', 'str', False, False, True, True, True, None, False), ('names', 'frozenset[str]', False, False, True, True, True, None, False), ('step_refs', 'frozenset[str]', False, False, True, True, True, None, False), ('ref', 'tuple[str, tuple[str | int, ...]] | None', False, False, True, True, True, None, False), ('steps_dynamic', 'bool', True, False, True, True, True, None, False))), planrun_plan_expressions_Expr, None),
    'planrun.plan.expressions.Template': ((True, True, False, (('parts', 'tuple[str | Expr, ...]', False, False, True, True, True, None, False),)), planrun_plan_expressions_Template, None),
    'planrun.run.context.ChildContext': ((True, True, False, (('request', 'RunRequest', False, False, True, True, True, None, False), ('prefix', 'str', False, False, True, True, True, None, False), ('stack', 'tuple[str, ...]', False, False, True, True, True, None, False), ('yes', 'bool', False, False, True, True, True, None, False), ('can_ask', 'bool', False, False, True, True, True, None, False), ('forced', 'tuple[str, ...]', True, False, True, True, True, None, False), ('parent', 'ParentContext', False, False, True, True, True, None, True), ('step_id', 'str', False, False, True, True, True, None, True))), planrun_run_context_ChildContext, None),
    'planrun.run.context.RunContext': ((True, True, False, (('request', 'RunRequest', False, False, True, True, True, None, False), ('prefix', 'str', False, False, True, True, True, None, False), ('stack', 'tuple[str, ...]', False, False, True, True, True, None, False), ('yes', 'bool', False, False, True, True, True, None, False), ('can_ask', 'bool', False, False, True, True, True, None, False), ('forced', 'tuple[str, ...]', True, False, True, True, True, None, False))), planrun_run_context_RunContext, None),
    'planrun.run.request.RunRequest': ((False, True, False, (('plan', 'str', False, False, True, True, True, None, False), ('text', 'str | None', True, False, True, True, True, None, False), ('variables', 'dict[str, Any]', False, True, True, True, True, None, False), ('vars_file', 'str | None', True, False, True, True, True, None, False), ('jobs', 'int | None', True, False, True, True, True, None, False), ('state', 'str | None', True, False, True, True, True, None, False), ('no_state', 'bool', True, False, True, True, True, None, False), ('resume', 'bool', True, False, True, True, True, None, False), ('keep_going', 'bool', True, False, True, True, True, None, False), ('yes', 'bool', True, False, True, True, True, None, False), ('only', 'list[str]', False, True, True, True, True, None, False), ('dry_run', 'bool', True, False, True, True, True, None, False), ('output', 'str', True, False, True, True, True, None, False), ('events', 'str | None', True, False, True, True, True, None, False), ('junit', 'str | None', True, False, True, True, True, None, False), ('report', 'str | None', True, False, True, True, True, None, False), ('quiet', 'bool', True, False, True, True, True, None, False), ('stream', 'bool', True, False, True, True, True, None, False), ('executor', 'str | None', True, False, True, True, True, None, False), ('address', 'str | None', True, False, True, True, True, None, False), ('planner', 'str | None', True, False, True, True, True, None, False), ('mcp_config', 'str | None', True, False, True, True, True, None, False), ('force', 'list[str]', False, True, True, True, True, None, False), ('no_cache', 'bool', True, False, True, True, True, None, False), ('cache_dir', 'str | None', True, False, True, True, True, None, False), ('explain', 'bool', True, False, True, True, True, None, False), ('remote_cache', 'str | None', True, False, True, True, True, None, False), ('remote_cache_read_only', 'bool', True, False, True, True, True, None, False), ('remote_cache_timeout', 'str | None', True, False, True, True, True, None, False), ('cwd', 'str', False, True, True, True, True, None, False), ('interactive', 'bool', True, False, True, True, True, None, False), ('console', 'bool', True, False, True, True, True, None, False), ('subscribers', 'list[Callable[[RunEvent], None]]', False, True, True, True, True, None, False), ('start_hint', 'str | None', True, False, True, True, True, None, False), ('grace', 'float | None', True, False, True, True, True, None, False), ('groups', 'ProcessGroups | None', True, False, True, True, True, None, False), ('report_failures', 'WriteFailures', False, True, True, True, True, None, False), ('params_required', 'bool', True, False, True, True, True, None, False), ('internal_targets', 'bool', True, False, True, True, True, None, False), ('environ', 'dict[str, str] | None', True, False, True, True, True, None, False), ('plan_found', 'bool', True, False, True, True, True, None, False), ('directories', 'tuple[str, ...]', True, False, True, True, True, None, False))), planrun_run_request_RunRequest, None),
    'planrun.run.scope.StepRecord': ((False, True, False, (('status', 'Status', True, False, True, True, True, None, False), ('attempts', 'int', True, False, True, True, True, None, False), ('result', 'Any', True, False, True, True, True, None, False), ('error', 'str | None', True, False, True, True, True, None, False), ('duration_s', 'float | None', True, False, True, True, True, None, False), ('fingerprint', 'str | None', True, False, True, True, True, None, False), ('kept', 'bool', True, False, True, True, True, None, False), ('upstream_failed', 'bool', True, False, True, True, True, None, False), ('result_masked', 'bool', True, False, True, True, True, None, False), ('reason', 'str | None', True, False, True, True, True, None, False), ('cache_key', 'str | None', True, False, True, True, True, None, False))), planrun_run_scope_StepRecord, None),
    'planrun.state.model.RunState': ((False, True, False, (('plan', 'str', False, False, True, True, True, None, False), ('version', 'int', True, False, True, True, True, None, False), ('digest', 'str | None', True, False, True, True, True, None, False), ('run_id', 'str | None', True, False, True, True, True, None, False), ('status', 'str', True, False, True, True, True, None, False), ('reason', 'str | None', True, False, True, True, True, None, False), ('error', 'str | None', True, False, True, True, True, None, False), ('started_at', 'str | None', True, False, True, True, True, None, False), ('ended_at', 'str | None', True, False, True, True, True, None, False), ('duration_s', 'float | None', True, False, True, True, True, None, False), ('variables', 'dict[str, Any]', False, True, True, True, True, None, False), ('steps', 'dict[str, StepState]', False, True, True, True, True, None, False), ('revisions', 'list[dict[str, Any]]', False, True, True, True, True, None, False), ('pid', 'int | None', True, False, True, True, True, None, False), ('jobs', 'int | None', True, False, True, True, True, None, False), ('targets', 'list[str] | None', True, False, True, True, True, None, False))), planrun_state_model_RunState, None),
    'planrun.state.model.StepState': ((False, True, False, (('status', 'str', True, False, True, True, True, None, False), ('attempts', 'int', True, False, True, True, True, None, False), ('result', 'Any', True, False, True, True, True, None, False), ('error', 'str | None', True, False, True, True, True, None, False), ('started_at', 'str | None', True, False, True, True, True, None, False), ('ended_at', 'str | None', True, False, True, True, True, None, False), ('duration_s', 'float | None', True, False, True, True, True, None, False), ('fingerprint', 'str | None', True, False, True, True, True, None, False), ('result_variable', 'str | None', True, False, True, True, True, None, False), ('reason', 'str | None', True, False, True, True, True, None, False), ('detail', 'str | None', True, False, True, True, True, None, False), ('title', 'str | None', True, False, True, True, True, None, False), ('result_masked', 'bool', True, False, True, True, True, None, False), ('cache_key', 'str | None', True, False, True, True, True, None, False), ('kept', 'bool', True, False, True, True, True, None, False), ('attempts_log', 'list[dict[str, Any]]', False, True, True, True, True, None, False))), planrun_state_model_StepState, None),
    'planrun.tools.base.Services': ((True, True, False, (('mcp', 'ToolPool | None', True, False, True, True, True, None, False), ('notice', 'Notice | None', True, False, True, True, True, None, False), ('dotenv', 'Mapping[str, str]', False, True, True, True, True, None, False), ('groups', 'ProcessGroups | None', True, False, True, True, True, None, False))), planrun_tools_base_Services, None),
}
