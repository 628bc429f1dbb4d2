"""Generated from the records' fields by `python -m planrun.records_write`: do not edit.

For each record of planrun.records: the function that makes its methods, and the fingerprint of
the fields that function was written from (planrun.records uses it only while they are the same).
"""

# mypy: ignore-errors
# ruff: noqa
# fmt: off

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
    def __setattr__(self, name, value):
        if type(self) is __rec_cls or name in ('timeout','retries','retry_delay','on_failure',):
            raise __rec_frozen_error(f"cannot assign to field {name!r}")
        super(__rec_cls, self).__setattr__(name, value)
    def __delattr__(self, name):
        if type(self) is __rec_cls or name in ('timeout','retries','retry_delay','on_failure',):
            raise __rec_frozen_error(f"cannot delete field {name!r}")
        super(__rec_cls, self).__delattr__(name)
    return {'__init__': __init__, '__repr__': __repr__, '__eq__': __eq__, '__hash__': __hash__, '__setattr__': __setattr__, '__delattr__': __delattr__}

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
    def __setattr__(self, name, value):
        if type(self) is __rec_cls or name in ('type','address',):
            raise __rec_frozen_error(f"cannot assign to field {name!r}")
        super(__rec_cls, self).__setattr__(name, value)
    def __delattr__(self, name):
        if type(self) is __rec_cls or name in ('type','address',):
            raise __rec_frozen_error(f"cannot delete field {name!r}")
        super(__rec_cls, self).__delattr__(name)
    return {'__init__': __init__, '__repr__': __repr__, '__eq__': __eq__, '__hash__': __hash__, '__setattr__': __setattr__, '__delattr__': __delattr__}

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
    def __setattr__(self, name, value):
        if type(self) is __rec_cls or name in ('max_steps','max_replans','max_concurrency','tool_caps',):
            raise __rec_frozen_error(f"cannot assign to field {name!r}")
        super(__rec_cls, self).__setattr__(name, value)
    def __delattr__(self, name):
        if type(self) is __rec_cls or name in ('max_steps','max_replans','max_concurrency','tool_caps',):
            raise __rec_frozen_error(f"cannot delete field {name!r}")
        super(__rec_cls, self).__delattr__(name)
    return {'__init__': __init__, '__repr__': __repr__, '__eq__': __eq__, '__hash__': __hash__, '__setattr__': __setattr__, '__delattr__': __delattr__}

def planrun_plan_definition_Param(__rec_cls, __rec_defaults, __rec_factories, __rec_factory, __rec_frozen_error):
    def __init__(self, *, type: "Annotated[ParamType, Spec(description='What --var VALUE is converted to (default: string).')]" = __rec_defaults['type'], default: "Annotated[Any, Spec(description='The value without --var / --vars-file.')]" = __rec_defaults['default'], required: "Annotated[bool, Spec(description='A run without a value for it is refused (exit 2).')]" = __rec_defaults['required'], choices: "Annotated[list[Any] | None, Spec(description='The only values it may take.')]" = __rec_defaults['choices'], description: "Annotated[str | None, Spec(description='Shown by `planrun list`.')]" = __rec_defaults['description']) -> None:
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
    def __setattr__(self, name, value):
        if type(self) is __rec_cls or name in ('type','default','required','choices','description',):
            raise __rec_frozen_error(f"cannot assign to field {name!r}")
        super(__rec_cls, self).__setattr__(name, value)
    def __delattr__(self, name):
        if type(self) is __rec_cls or name in ('type','default','required','choices','description',):
            raise __rec_frozen_error(f"cannot delete field {name!r}")
        super(__rec_cls, self).__delattr__(name)
    return {'__init__': __init__, '__repr__': __repr__, '__eq__': __eq__, '__hash__': __hash__, '__setattr__': __setattr__, '__delattr__': __delattr__}

def planrun_plan_definition_Plan(__rec_cls, __rec_defaults, __rec_factories, __rec_factory, __rec_frozen_error):
    def __init__(self, *, version: 'Version | None' = __rec_defaults['version'], name: "Annotated[str | None, Spec(description='Default: the file stem. Alias: id.')]" = __rec_defaults['name'], title: 'str | None' = __rec_defaults['title'], description: 'str | None' = __rec_defaults['description'], variables: "Annotated[dict[str, Any], Spec(json_schema_extra={'propertyNames': none_of(SCOPE_NAMES)})]" = __rec_factory, servers: 'dict[str, ServerEntry]' = __rec_factory, defaults: 'Defaults' = __rec_factory, limits: 'Limits' = __rec_factory, policy: 'Policy' = __rec_factory, replan: 'Replan | None' = __rec_defaults['replan'], secrets: 'list[str]' = __rec_factory, executor: 'ExecutorConfig | None' = __rec_defaults['executor'], dotenv: 'Annotated[list[str], Spec(description="KEY=VALUE files added to the steps\' environment; a name ending in ? is optional. Names may hold ${...} (variables).")]' = __rec_factory, grace: "Annotated[Duration | None, Spec(description='How long an interrupt waits for running steps to end before killing them (default 10s; --grace overrides).')]" = __rec_defaults['grace'], env: "Annotated[dict[str, str], Spec(description='Environment variables for every run, shell and python step (over dotenv files and the process environment). Values may hold ${...}.')]" = __rec_factory, default: "Annotated[list[StepId] | None, Spec(description='Step ids (or aliases) `planrun run` runs, with what they depend on, when no target is given; without it, every step.')]" = __rec_defaults['default'], params: 'Annotated[dict[str, Param], Spec(description="Variables that are the plan\'s command-line interface (--var NAME=...): typed, with a default, choices, required.", json_schema_extra={\'propertyNames\': {\'pattern\': NAME_PATTERN, **none_of(SCOPE_NAMES)}})]' = __rec_factory, steps: 'list[Step]' = __rec_factory) -> None:
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
    def __setattr__(self, name, value):
        if type(self) is __rec_cls or name in ('version','name','title','description','variables','servers','defaults','limits','policy','replan','secrets','executor','dotenv','grace','env','default','params','steps','_index',):
            raise __rec_frozen_error(f"cannot assign to field {name!r}")
        super(__rec_cls, self).__setattr__(name, value)
    def __delattr__(self, name):
        if type(self) is __rec_cls or name in ('version','name','title','description','variables','servers','defaults','limits','policy','replan','secrets','executor','dotenv','grace','env','default','params','steps','_index',):
            raise __rec_frozen_error(f"cannot delete field {name!r}")
        super(__rec_cls, self).__delattr__(name)
    return {'__init__': __init__, '__repr__': __repr__, '__eq__': __eq__, '__hash__': __hash__, '__setattr__': __setattr__, '__delattr__': __delattr__}

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
    def __setattr__(self, name, value):
        if type(self) is __rec_cls or name in ('require_approval','deny',):
            raise __rec_frozen_error(f"cannot assign to field {name!r}")
        super(__rec_cls, self).__setattr__(name, value)
    def __delattr__(self, name):
        if type(self) is __rec_cls or name in ('require_approval','deny',):
            raise __rec_frozen_error(f"cannot delete field {name!r}")
        super(__rec_cls, self).__delattr__(name)
    return {'__init__': __init__, '__repr__': __repr__, '__eq__': __eq__, '__hash__': __hash__, '__setattr__': __setattr__, '__delattr__': __delattr__}

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
    def __setattr__(self, name, value):
        if type(self) is __rec_cls or name in ('command','tool','timeout',):
            raise __rec_frozen_error(f"cannot assign to field {name!r}")
        super(__rec_cls, self).__setattr__(name, value)
    def __delattr__(self, name):
        if type(self) is __rec_cls or name in ('command','tool','timeout',):
            raise __rec_frozen_error(f"cannot delete field {name!r}")
        super(__rec_cls, self).__delattr__(name)
    return {'__init__': __init__, '__repr__': __repr__, '__eq__': __eq__, '__hash__': __hash__, '__setattr__': __setattr__, '__delattr__': __delattr__}

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
    def __setattr__(self, name, value):
        if type(self) is __rec_cls or name in ('type','command','args','env','cwd','envFile','url','headers','connect_timeout',):
            raise __rec_frozen_error(f"cannot assign to field {name!r}")
        super(__rec_cls, self).__setattr__(name, value)
    def __delattr__(self, name):
        if type(self) is __rec_cls or name in ('type','command','args','env','cwd','envFile','url','headers','connect_timeout',):
            raise __rec_frozen_error(f"cannot delete field {name!r}")
        super(__rec_cls, self).__delattr__(name)
    return {'__init__': __init__, '__repr__': __repr__, '__eq__': __eq__, '__hash__': __hash__, '__setattr__': __setattr__, '__delattr__': __delattr__}

def planrun_plan_definition_Step(__rec_cls, __rec_defaults, __rec_factories, __rec_factory, __rec_frozen_error):
    def __init__(self, *, id: "Annotated[StepId, Spec(description='Unique step id ([A-Za-z0-9_.-]+). Alias: index.')]", title: 'str | None' = __rec_defaults['title'], tool: 'Annotated[str, Spec(description="Built-in tool name, or SERVER.TOOL for an MCP server. A step has \'tool\' or \'run\', not both (\'run\' is tool: shell).", json_schema_extra={\'minLength\': 1})]', args: 'dict[str, Any]' = __rec_factory, depends_on: 'list[StepId]' = __rec_factory, result_variable: 'Annotated[str | None, Spec(pattern=NAME_PATTERN, json_schema_extra=none_of(SCOPE_NAMES))]' = __rec_defaults['result_variable'], when: 'str | bool | None' = __rec_defaults['when'], timeout: 'Duration | None' = __rec_defaults['timeout'], retries: 'Count | None' = __rec_defaults['retries'], retry_delay: 'Duration | None' = __rec_defaults['retry_delay'], on_failure: 'OnFailure | None' = __rec_defaults['on_failure'], expected_outcome: 'str | None' = __rec_defaults['expected_outcome'], approval: 'Annotated[bool | ApprovalText, Spec(description="true: asked with the step\'s title (and command); a text: the question asked.")]' = __rec_defaults['approval'], description: 'str | None' = __rec_defaults['description'], resources: "Annotated[dict[str, float] | None, Spec(description='Dask worker resources this step needs, e.g. {cpu: 2}.')]" = __rec_defaults['resources'], sources: "Annotated[list[SourceGlob] | None, Spec(description='Files the step reads (globs, ** across directories, ! excludes): in its cache key.')]" = __rec_defaults['sources'], outputs: "Annotated[list[OutputGlob] | None, Spec(description='Files the step produces (globs): stored and restored by the cache.')]" = __rec_defaults['outputs'], cache: "Annotated[bool | None, Spec(description='Cache this step (default: true when sources or outputs are given).')]" = __rec_defaults['cache'], foreach: "Annotated[list[Any] | dict[str, Any] | ForeachExpression | None, Spec(description='Run the step once per element: a list, a mapping (elements {key, value}) or one ${expression} giving either. Instances are ID[0], ID[1], ...')]" = __rec_defaults['foreach'], as_: 'Annotated[str | None, Spec(alias=\'as\', pattern=NAME_PATTERN, description="The element\'s name in args, when and title (default: item).", json_schema_extra=none_of(SCOPE_NAMES | {INDEX_NAME}))]' = __rec_defaults['as_'], aliases: 'Annotated[list[StepId], Spec(description="Other names of the step as a target: `planrun run ALIAS`, --only, --force=ALIAS. None may be another step\'s id or alias.")]' = __rec_factory, internal: "Annotated[bool, Spec(description='A helper step: not shown by `list` (`list --all` shows it), refused as a target; runs as a dependency of the steps that need it.')]" = __rec_defaults['internal'], run: "Annotated[str | list[str] | None, Spec(description='A shell step (tool: shell) in short: a string is one script run by /bin/sh -e -c (it stops at its first failing command); a list runs each string by /bin/sh -c in order and stops at the first that fails. ${...} values are quoted for the shell.')]" = __rec_defaults['run'], env: 'Annotated[dict[str, str] | None, Spec(description="Environment variables for a run, shell or python step (over the plan\'s env; a shell step\'s args.env wins). Values may hold ${...}.")]' = __rec_defaults['env'], cwd: 'Annotated[str | None, Spec(description="The directory a run or shell step runs in, and a plan step\'s sub-plan runs in (relative to the working directory; may hold ${...}). The step\'s sources and outputs are relative to it.")]' = __rec_defaults['cwd'], always: "Annotated[bool, Spec(description='Run once every dependency has finished, whatever its status (also after an abort; not after an interrupt). Its failure fails the run.')]" = __rec_defaults['always'], matrix: "Annotated[dict[str, list[Any]] | None, Spec(description='Run the step once per combination of these lists (the first name varies slowest), each bound to `matrix` (${matrix.NAME}); `exclude: [{...}]` drops combinations. Instances are ID[0], ID[1], ...')]" = __rec_defaults['matrix'], max_parallel: "Annotated[PositiveCount | None, Spec(description='A foreach or matrix step: at most this many instances at once.')]" = __rec_defaults['max_parallel']) -> None:
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
    def __setattr__(self, name, value):
        if type(self) is __rec_cls or name in ('id','title','tool','args','depends_on','result_variable','when','timeout','retries','retry_delay','on_failure','expected_outcome','approval','description','resources','sources','outputs','cache','foreach','as_','aliases','internal','run','env','cwd','always','matrix','max_parallel',):
            raise __rec_frozen_error(f"cannot assign to field {name!r}")
        super(__rec_cls, self).__setattr__(name, value)
    def __delattr__(self, name):
        if type(self) is __rec_cls or name in ('id','title','tool','args','depends_on','result_variable','when','timeout','retries','retry_delay','on_failure','expected_outcome','approval','description','resources','sources','outputs','cache','foreach','as_','aliases','internal','run','env','cwd','always','matrix','max_parallel',):
            raise __rec_frozen_error(f"cannot delete field {name!r}")
        super(__rec_cls, self).__delattr__(name)
    return {'__init__': __init__, '__repr__': __repr__, '__eq__': __eq__, '__hash__': __hash__, '__setattr__': __setattr__, '__delattr__': __delattr__}

MAKERS = {
    'planrun.plan.definition.Defaults': ((True, False, False, (('timeout', 'Duration | None', True, False, True, True, True, None, True), ('retries', 'Count', True, False, True, True, True, None, True), ('retry_delay', 'Duration', True, False, True, True, True, None, True), ('on_failure', 'OnFailure', True, False, True, True, True, None, True))), planrun_plan_definition_Defaults, "Defaults(*, timeout: 'Duration | None' = None, retries: 'Count' = 0, retry_delay: 'Duration' = 1.0, on_failure: 'OnFailure' = <OnFailure.abort: 'abort'>)"),
    'planrun.plan.definition.ExecutorConfig': ((True, False, False, (('type', "Literal['local', 'dask']", True, False, True, True, True, None, True), ('address', 'str | None', True, False, True, True, True, None, True))), planrun_plan_definition_ExecutorConfig, 'ExecutorConfig(*, type: "Literal[\'local\', \'dask\']" = \'local\', address: \'str | None\' = None)'),
    'planrun.plan.definition.Limits': ((True, False, False, (('max_steps', 'PositiveCount | None', True, False, True, True, True, None, True), ('max_replans', 'Count', True, False, True, True, True, None, True), ('max_concurrency', 'PositiveCount | None', True, False, True, True, True, None, True), ('tool_caps', 'dict[str, Count]', False, True, True, True, True, None, True))), planrun_plan_definition_Limits, "Limits(*, max_steps: 'PositiveCount | None' = None, max_replans: 'Count' = 2, max_concurrency: 'PositiveCount | None' = None, tool_caps: 'dict[str, Count]' = <factory>)"),
    'planrun.plan.definition.Param': ((True, True, False, (('type', "Annotated[ParamType, Spec(description='What --var VALUE is converted to (default: string).')]", True, False, True, True, True, None, True), ('default', "Annotated[Any, Spec(description='The value without --var / --vars-file.')]", True, False, True, True, True, None, True), ('required', "Annotated[bool, Spec(description='A run without a value for it is refused (exit 2).')]", True, False, True, True, True, None, True), ('choices', "Annotated[list[Any] | None, Spec(description='The only values it may take.')]", True, False, True, True, True, None, True), ('description', "Annotated[str | None, Spec(description='Shown by `planrun list`.')]", True, False, True, True, True, None, True))), planrun_plan_definition_Param, None),
    'planrun.plan.definition.Plan': ((True, True, False, (('version', 'Version | None', True, False, True, True, True, None, True), ('name', "Annotated[str | None, Spec(description='Default: the file stem. Alias: id.')]", True, False, True, True, True, None, True), ('title', 'str | None', True, False, True, True, True, None, True), ('description', 'str | None', True, False, True, True, True, None, True), ('variables', "Annotated[dict[str, Any], Spec(json_schema_extra={'propertyNames': none_of(SCOPE_NAMES)})]", False, True, True, True, True, None, True), ('servers', 'dict[str, ServerEntry]', False, True, True, True, True, None, True), ('defaults', 'Defaults', False, True, True, True, True, None, True), ('limits', 'Limits', False, True, True, True, True, None, True), ('policy', 'Policy', False, True, True, True, True, None, True), ('replan', 'Replan | None', True, False, True, True, True, None, True), ('secrets', 'list[str]', False, True, True, True, True, None, True), ('executor', 'ExecutorConfig | None', True, False, True, True, True, None, True), ('dotenv', 'Annotated[list[str], Spec(description="KEY=VALUE files added to the steps\' environment; a name ending in ? is optional. Names may hold ${...} (variables).")]', False, True, True, True, True, None, True), ('grace', "Annotated[Duration | None, Spec(description='How long an interrupt waits for running steps to end before killing them (default 10s; --grace overrides).')]", True, False, True, True, True, None, True), ('env', "Annotated[dict[str, str], Spec(description='Environment variables for every run, shell and python step (over dotenv files and the process environment). Values may hold ${...}.')]", False, True, True, True, True, None, True), ('default', "Annotated[list[StepId] | None, Spec(description='Step ids (or aliases) `planrun run` runs, with what they depend on, when no target is given; without it, every step.')]", True, False, True, True, True, None, True), ('params', 'Annotated[dict[str, Param], Spec(description="Variables that are the plan\'s command-line interface (--var NAME=...): typed, with a default, choices, required.", json_schema_extra={\'propertyNames\': {\'pattern\': NAME_PATTERN, **none_of(SCOPE_NAMES)}})]', False, True, True, True, True, None, True), ('steps', 'list[Step]', False, True, True, True, True, None, True), ('_index', 'dict[str, Step] | None', True, False, False, False, False, None, True))), planrun_plan_definition_Plan, None),
    'planrun.plan.definition.Policy': ((True, False, False, (('require_approval', 'list[str]', False, True, True, True, True, None, True), ('deny', 'list[str]', False, True, True, True, True, None, True))), planrun_plan_definition_Policy, "Policy(*, require_approval: 'list[str]' = <factory>, deny: 'list[str]' = <factory>)"),
    'planrun.plan.definition.Replan': ((True, False, False, (('command', 'list[str] | str | None', True, False, True, True, True, None, True), ('tool', 'str | None', True, False, True, True, True, None, True), ('timeout', 'Duration', True, False, True, True, True, None, True))), planrun_plan_definition_Replan, "Replan(*, command: 'list[str] | str | None' = None, tool: 'str | None' = None, timeout: 'Duration' = 60.0)"),
    'planrun.plan.definition.ServerEntry': ((True, True, False, (('type', "Literal['stdio', 'http', 'sse', 'streamable-http'] | None", True, False, True, True, True, None, True), ('command', 'str | None', True, False, True, True, True, None, True), ('args', 'list[str]', False, True, True, True, True, None, True), ('env', 'dict[str, str]', False, True, True, True, True, None, True), ('cwd', 'str | None', True, False, True, True, True, None, True), ('envFile', 'str | None', True, False, True, True, True, None, True), ('url', 'str | None', True, False, True, True, True, None, True), ('headers', 'dict[str, str]', False, True, True, True, True, None, True), ('connect_timeout', "Annotated[Duration | None, Spec(description='planrun: how long the start-up handshake may take (default 20s).')]", True, False, True, True, True, None, True))), planrun_plan_definition_ServerEntry, None),
    'planrun.plan.definition.Step': ((True, True, False, (('id', "Annotated[StepId, Spec(description='Unique step id ([A-Za-z0-9_.-]+). Alias: index.')]", False, False, True, True, True, None, True), ('title', 'str | None', True, False, True, True, True, None, True), ('tool', 'Annotated[str, Spec(description="Built-in tool name, or SERVER.TOOL for an MCP server. A step has \'tool\' or \'run\', not both (\'run\' is tool: shell).", json_schema_extra={\'minLength\': 1})]', False, False, True, True, True, None, True), ('args', 'dict[str, Any]', False, True, True, True, True, None, True), ('depends_on', 'list[StepId]', False, True, True, True, True, None, True), ('result_variable', 'Annotated[str | None, Spec(pattern=NAME_PATTERN, json_schema_extra=none_of(SCOPE_NAMES))]', True, False, True, True, True, None, True), ('when', 'str | bool | None', True, False, True, True, True, None, True), ('timeout', 'Duration | None', True, False, True, True, True, None, True), ('retries', 'Count | None', True, False, True, True, True, None, True), ('retry_delay', 'Duration | None', True, False, True, True, True, None, True), ('on_failure', 'OnFailure | None', True, False, True, True, True, None, True), ('expected_outcome', 'str | None', True, False, True, True, True, None, True), ('approval', 'Annotated[bool | ApprovalText, Spec(description="true: asked with the step\'s title (and command); a text: the question asked.")]', True, False, True, True, True, None, True), ('description', 'str | None', True, False, True, True, True, None, True), ('resources', "Annotated[dict[str, float] | None, Spec(description='Dask worker resources this step needs, e.g. {cpu: 2}.')]", True, False, True, True, True, None, True), ('sources', "Annotated[list[SourceGlob] | None, Spec(description='Files the step reads (globs, ** across directories, ! excludes): in its cache key.')]", True, False, True, True, True, None, True), ('outputs', "Annotated[list[OutputGlob] | None, Spec(description='Files the step produces (globs): stored and restored by the cache.')]", True, False, True, True, True, None, True), ('cache', "Annotated[bool | None, Spec(description='Cache this step (default: true when sources or outputs are given).')]", True, False, True, True, True, None, True), ('foreach', "Annotated[list[Any] | dict[str, Any] | ForeachExpression | None, Spec(description='Run the step once per element: a list, a mapping (elements {key, value}) or one ${expression} giving either. Instances are ID[0], ID[1], ...')]", True, False, True, True, True, None, True), ('as_', 'Annotated[str | None, Spec(alias=\'as\', pattern=NAME_PATTERN, description="The element\'s name in args, when and title (default: item).", json_schema_extra=none_of(SCOPE_NAMES | {INDEX_NAME}))]', True, False, True, True, True, None, True), ('aliases', 'Annotated[list[StepId], Spec(description="Other names of the step as a target: `planrun run ALIAS`, --only, --force=ALIAS. None may be another step\'s id or alias.")]', False, True, True, True, True, None, True), ('internal', "Annotated[bool, Spec(description='A helper step: not shown by `list` (`list --all` shows it), refused as a target; runs as a dependency of the steps that need it.')]", True, False, True, True, True, None, True), ('run', "Annotated[str | list[str] | None, Spec(description='A shell step (tool: shell) in short: a string is one script run by /bin/sh -e -c (it stops at its first failing command); a list runs each string by /bin/sh -c in order and stops at the first that fails. ${...} values are quoted for the shell.')]", True, False, True, True, True, None, True), ('env', 'Annotated[dict[str, str] | None, Spec(description="Environment variables for a run, shell or python step (over the plan\'s env; a shell step\'s args.env wins). Values may hold ${...}.")]', True, False, True, True, True, None, True), ('cwd', 'Annotated[str | None, Spec(description="The directory a run or shell step runs in, and a plan step\'s sub-plan runs in (relative to the working directory; may hold ${...}). The step\'s sources and outputs are relative to it.")]', True, False, True, True, True, None, True), ('always', "Annotated[bool, Spec(description='Run once every dependency has finished, whatever its status (also after an abort; not after an interrupt). Its failure fails the run.')]", True, False, True, True, True, None, True), ('matrix', "Annotated[dict[str, list[Any]] | None, Spec(description='Run the step once per combination of these lists (the first name varies slowest), each bound to `matrix` (${matrix.NAME}); `exclude: [{...}]` drops combinations. Instances are ID[0], ID[1], ...')]", True, False, True, True, True, None, True), ('max_parallel', "Annotated[PositiveCount | None, Spec(description='A foreach or matrix step: at most this many instances at once.')]", True, False, True, True, True, None, True))), planrun_plan_definition_Step, None),
}
