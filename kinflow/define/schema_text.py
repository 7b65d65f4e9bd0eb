"""The words of the definition JSON Schema: one line for every node and key an author writes.

Kept apart from ``kinflow.define.schema`` (the generator) so the text can be
read and edited as a list. ``("*", key)`` applies to that key on every node
that has it; ``(node, key)`` wins over it. docs/definitions.md says the same
at length, with examples.
"""

from __future__ import annotations

DEF_DESCRIPTIONS: dict[str, str] = {
    "WorkflowDefinition": "A workflow: fields, and stages an instance moves through.",
    "DefinitionBatch": "Several definitions in one file, with a $schema for editors.",
    "Stage": "A step of the workflow; no transitions makes it terminal (the instance ends).",
    "Activity": "A piece of work in a stage; it is resolved when an action sets its status.",
    "Action": "What a caller fires (no `when`) or the engine fires (with `when`).",
    "Transition": "An edge to another stage, taken when `when` holds.",
    "SpawnBlock": "Start one child instance per row of `forEach`: a cohort.",
    "DefinitionRef": "The child definition a spawn starts.",
    "FailureBudget": "How many children of the cohort may fail: exactly one of count or percent.",
    "StartRate": "At most count children of the cohort start in any perSeconds window.",
    "RetryPolicy": "Automatic retries of a row whose attempt failed or timed out, with backoff.",
    "Retention": "How long a finished family of this root definition is kept.",
    "FieldEntry": "A declared field: a named, typed value of the instance.",
    "FieldShape": "A sub-field: an object's key, an array row's column or an effect output.",
    "Effect": "Work for host code (a handler registered under `name`), queued by the action.",
    "ActionParam": "A value the caller passes when firing the action.",
    "Requirement": "A readiness check: caller-fired actions are disabled while it is unmet.",
    "Group": "Presentation metadata: a named group of fields, activities or actions.",
    "UrlTarget": "Render hint: the work happens at this URL.",
    "FieldTarget": "Render hint: the work is about this field.",
    "FieldRef": "A field by scope and name.",
    "AuthoredFieldRef": "A field: its name (resolved activity, then stage, then workflow), "
                        "{field}, or {scope, field}.",
    "ChoiceList": "The values a field or param may take.",
    "ChoiceOption": "One allowed value and its label.",
    "Bounds": "Numeric bounds of a number field or param.",
    "InputSource": "The value comes from the caller (a start's fields, a spawn's `with`).",
    "LiteralSource": "A fixed initial value.",
    "QuerySource": "The value of a GROQ query over the lake, read when the scope is entered.",
    "FieldReadSource": "A copy of another field's value when this scope is entered.",
    "LiteralValue": "A fixed value.",
    "FieldReadValue": "The current value of a field.",
    "ParamValue": "The value of one of the action's params.",
    "ActorValue": "Who fired the action.",
    "NowValue": "The time of the commit (RFC 3339).",
    "SelfValue": "The instance's own reference.",
    "StageValue": "The name of the current stage.",
    "ObjectValue": "An object whose keys are value expressions.",
    "SetOp": "Write a value into a field.",
    "SetIfMissingOp": "Write a value into a field that is empty.",
    "UnsetOp": "Empty a field.",
    "AppendOp": "Append a value (or each value of a list) to an array field.",
    "IncOp": "Add to a number field (1 without value).",
    "DecOp": "Subtract from a number field (1 without value).",
    "UpdateWhereOp": "Merge a value into every row of an array field that `where` selects.",
    "RemoveWhereOp": "Remove every row of an array field that `where` selects.",
    "StatusSetOp": "Set an activity's status; done, skipped or failed resolves it.",
}

KEY_DESCRIPTIONS: dict[tuple[str, str], str] = {
    ("*", "$schema"): "The JSON Schema the file follows (for editors; deploy ignores it).",
    ("DefinitionBatch", "definitions"): "The definitions, deployed as one batch.",
    ("*", "name"): "Unique among its siblings; what the API and the CLI call it.",
    ("*", "title"): "Label for people.",
    ("*", "description"): "Longer text for people.",
    ("*", "semantics"): "Advisory tags (e.g. signal.positive, decision.accept); not acted on.",
    ("*", "groups"): "Presentation groups declared here, named by `group`.",
    ("*", "group"): "The group(s) this belongs to: a name or a list of names.",
    ("*", "fields"): "Fields declared at this scope.",
    ("*", "filter"): "GROQ: whether this exists at all (false hides it).",
    ("*", "options"): "The allowed values: {list: [{title, value}]}.",
    ("*", "validation"): "Numeric bounds {min, max}.",
    ("*", "type"): "Which kind of node this is.",
    ("*", "target"): "The field written: a name, {field} or {scope, field}.",
    ("*", "value"): "The value expression to write.",
    ("*", "where"): "GROQ over `$row`: which rows of the array field.",
    ("WorkflowDefinition", "name"): "The definition's identity: lowercase letters, digits and "
                                    "dashes; a new deploy of the same name is a new version.",
    ("WorkflowDefinition", "title"): "Label for people (required).",
    ("WorkflowDefinition", "lifecycle"): "\"child\": meant to be spawned by a parent (start "
                                         "pickers leave it out; it can still be started). "
                                         "Default \"standalone\".",
    ("WorkflowDefinition", "initialStage"): "The stage a new instance enters.",
    ("WorkflowDefinition", "fields"): "Workflow-scope fields: the instance's inputs and state.",
    ("WorkflowDefinition", "stages"): "The stages, at least one.",
    ("WorkflowDefinition", "predicates"): "Named GROQ conditions, bound as $<name> in every "
                                          "condition.",
    ("WorkflowDefinition", "roleAliases"): "Role -> roles that may act for it; \"*\" lists "
                                           "roles that may act for any.",
    ("WorkflowDefinition", "retention"): "Purge a finished family {days} after its last "
                                         "member finished (root definitions only).",
    ("WorkflowDefinition", "outputs"): "Workflow-scope fields copied onto the parent's row "
                                       "when this child finishes.",
    ("WorkflowDefinition", "cancelStage"): "The stage a cancelled instance cleans up in.",
    ("WorkflowDefinition", "cancelTimeoutSeconds"): "How long the clean-up may take before the "
                                                    "instance is aborted.",
    ("Stage", "activities"): "The work of this stage; a terminal stage has none.",
    ("Stage", "transitions"): "Edges out, tried in order; none makes the stage terminal.",
    ("Stage", "editable"): "Field name -> true or GROQ: tightens that field's own `editable` "
                           "while in this stage.",
    ("Stage", "outcome"): "On a terminal stage: what a parent's row reads when the child ends "
                          "here. Default \"succeeded\".",
    ("Activity", "target"): "Render hint: {type: url, url} or {type: field, field}.",
    ("Activity", "filter"): "GROQ evaluated once at stage entry: false skips the activity.",
    ("Activity", "requirements"): "GROQ readiness checks; unmet ones disable caller-fired "
                                  "actions.",
    ("Activity", "actions"): "The actions of this activity.",
    ("Action", "when"): "GROQ: makes the action cascade-fired; the engine fires it once per "
                        "stage visit when it holds (\"true\": on stage entry).",
    ("Action", "filter"): "GROQ: whether the action exists now (a caller-fired action that "
                          "fails it is absent).",
    ("Action", "params"): "What a caller passes when firing (caller-fired actions only).",
    ("Action", "ops"): "Writes applied in order in the action's commit.",
    ("Action", "effects"): "Work queued for host code in the action's commit.",
    ("Action", "spawn"): "Start one child per row (after the ops and effects).",
    ("Action", "roles"): "Roles that may fire it (caller-fired) or the roles the engine fires "
                         "it as (cascade-fired).",
    ("Action", "status"): "Shorthand for a status.set op on this action's activity.",
    ("Transition", "to"): "The stage entered.",
    ("Transition", "when"): "GROQ; default $allActivitiesDone.",
    ("SpawnBlock", "forEach"): "GROQ giving the rows (may read the lake with *): one child per "
                               "row, identified by the row itself (a string, number or "
                               "boolean) or an object row's _key, else _id.",
    ("SpawnBlock", "definition"): "The child definition: {name, version?}.",
    ("SpawnBlock", "with"): "Child input field -> GROQ over $row (and $fields, $actor): the "
                            "child's start values.",
    ("SpawnBlock", "context"): "Name -> GROQ: scalars or references the child reads as "
                               "$context.",
    ("SpawnBlock", "onExit"): "What leaving the stage does to live children: \"detach\" "
                              "(default: they run on), \"abort\" or \"cancel\".",
    ("SpawnBlock", "onCancel"): "What cancelling the parent does to a live child: \"cancel\" "
                                "(default), \"abort\" or \"detach\".",
    ("SpawnBlock", "maxActive"): "At most this many children live at once; the rest wait "
                                 "queued. Default: no limit.",
    ("SpawnBlock", "failureBudget"): "How many children may fail: {count} or {percent}.",
    ("SpawnBlock", "onBudgetExceeded"): "Once more fail than the budget allows: "
                                        "\"abort-rest\" (default), \"cancel-rest\", "
                                        "\"continue\" or \"pause\".",
    ("SpawnBlock", "priority"): "GROQ over $row, a number: queued rows start highest "
                                "first, ties in registration order. Default 0.",
    ("SpawnBlock", "concurrencyKey"): "GROQ over $row, a string: the row's key for "
                                      "maxActivePerKey. Comes with maxActivePerKey.",
    ("SpawnBlock", "maxActivePerKey"): "At most this many children with the same "
                                       "concurrencyKey live at once, inside maxActive.",
    ("SpawnBlock", "startRate"): "At most {count} children start in any {perSeconds} "
                                 "window.",
    ("SpawnBlock", "childTimeoutSeconds"): "A child still live this long after its "
                                           "attempt started is timed out.",
    ("SpawnBlock", "onTimeout"): "What a timeout does to the child: \"abort\" (default) or "
                                 "\"cancel\".",
    ("SpawnBlock", "retry"): "Re-queue a row whose attempt failed or timed out: {attempts, "
                             "backoffSeconds, factor, maxBackoffSeconds, on}.",
    ("SpawnBlock", "completeWhen"): "GROQ over $cohort: once true the cohort is complete and "
                                    "rows not started are skipped.",
    ("SpawnBlock", "onComplete"): "What completion does to live children: \"abort\" "
                                  "(default), \"cancel\" or \"continue\".",
    ("SpawnBlock", "aggregate"): "Name -> sum/min/max/avg(row path) or count(condition), "
                                 "kept as rows finish; read as $cohort.aggregates.",
    ("StartRate", "count"): "Starts allowed per window.",
    ("StartRate", "perSeconds"): "The window's length in seconds.",
    ("RetryPolicy", "attempts"): "Attempts in all, the first included.",
    ("RetryPolicy", "backoffSeconds"): "Wait before the first retry (default 0).",
    ("RetryPolicy", "factor"): "Each retry waits this many times the previous (default 1).",
    ("RetryPolicy", "maxBackoffSeconds"): "The longest wait. Default: no bound.",
    ("RetryPolicy", "on"): "Outcomes retried: \"failed\", \"timed-out\" (default both).",
    ("DefinitionRef", "name"): "The child definition's name.",
    ("DefinitionRef", "version"): "A version number pins it; absent or \"latest\": the newest "
                                  "when the spawn runs.",
    ("FailureBudget", "count"): "Failures tolerated; one more acts.",
    ("FailureBudget", "percent"): "Failures tolerated as a percentage of the cohort's rows.",
    ("Retention", "days"): "Days after the family finished (1 to 36500).",
    ("FieldEntry", "type"): "The field's kind.",
    ("FieldEntry", "required"): "A start (or a spawn's `with`) must give it a value; only on "
                                "workflow-scope input fields.",
    ("FieldEntry", "initialValue"): "Where the first value comes from: input, literal, query "
                                    "or fieldRead. Default: empty.",
    ("FieldEntry", "editable"): "Whether editField may change it: true, GROQ, or a list of "
                                "roles. Default: not editable.",
    ("*", "types"): "For reference fields: the document types it may point at.",
    ("*", "roles"): "For assignee fields: the roles it may name.",
    ("FieldShape", "fields"): "An object's keys.",
    ("FieldShape", "of"): "An array row's columns.",
    ("FieldEntry", "of"): "An array field's row columns (required for type array).",
    ("FieldShape", "type"): "The sub-field's kind.",
    ("Effect", "name"): "The handler's name; unique in the definition.",
    ("Effect", "bindings"): "Key -> GROQ evaluated when queued; passed to the handler.",
    ("Effect", "input"): "Fixed values passed to the handler (win over bindings).",
    ("Effect", "outputs"): "The outputs the handler may return, read as $effects['name'].",
    ("ActionParam", "type"): "The param's kind.",
    ("ActionParam", "required"): "The caller must pass it.",
    ("Requirement", "type"): "Always \"groq\".",
    ("Requirement", "query"): "GROQ that must be true for the requirement to be met.",
    ("Group", "kind"): "\"core\" or \"details\": how prominently to show the group.",
    ("UrlTarget", "url"): "Where the work happens.",
    ("FieldTarget", "field"): "{scope, field} the work is about.",
    ("FieldRef", "scope"): "\"workflow\", \"stage\" or \"activity\".",
    ("FieldRef", "field"): "The field's name.",
    ("ChoiceList", "list"): "The allowed values.",
    ("ChoiceOption", "value"): "The stored value.",
    ("Bounds", "min"): "Smallest allowed value.",
    ("Bounds", "max"): "Largest allowed value.",
    ("LiteralSource", "value"): "The initial value.",
    ("QuerySource", "query"): "GROQ over the lake (may use *).",
    ("*", "scope"): "\"workflow\", \"stage\" or \"activity\"; default: the nearest scope "
                    "declaring the field.",
    ("*", "field"): "The field's name.",
    ("*", "path"): "A path inside the field's value (e.g. \"amount\").",
    ("ParamValue", "param"): "The param's name.",
    ("ObjectValue", "fields"): "Key -> value expression.",
    ("IncOp", "value"): "How much to add; default 1.",
    ("DecOp", "value"): "How much to subtract; default 1.",
    ("StatusSetOp", "activity"): "The activity; default: the firing action's own.",
    ("StatusSetOp", "status"): "\"active\", \"done\", \"skipped\" or \"failed\".",
}
