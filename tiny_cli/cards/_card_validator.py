"""Generated from card.schema.json by fastjsonschema 2.22.3; do not edit.

Regenerate: python -m tiny_cli.cards.index
"""

# schema sha256: 8597500f25fc86d4c55b1cedb27bf04d51daa6688be00a4234db5af508f56856
VERSION = "2.22.3"
from decimal import Decimal
import re
from fastjsonschema import JsonSchemaValueException, JsonSchemaValuesException


REGEX_PATTERNS = {
    '^[a-z0-9][a-z0-9_-]{0,62}$(?!\\n)': re.compile('^[a-z0-9][a-z0-9_-]{0,62}\\Z(?!\\n)'),
    '^(?:[A-Za-z_][A-Za-z0-9_-]{0,63}|[A-Za-z0-9][A-Za-z0-9_-]{0,31}\\.[A-Za-z0-9_.-]{1,128})$(?!\\n)': re.compile('^(?:[A-Za-z_][A-Za-z0-9_-]{0,63}|[A-Za-z0-9][A-Za-z0-9_-]{0,31}\\.[A-Za-z0-9_.-]{1,128})\\Z(?!\\n)'),
    '^[A-Za-z_][A-Za-z0-9_-]{0,63}$(?!\\n)': re.compile('^[A-Za-z_][A-Za-z0-9_-]{0,63}\\Z(?!\\n)'),
    '^[A-Za-z_][A-Za-z0-9_]{0,63}$(?!\\n)': re.compile('^[A-Za-z_][A-Za-z0-9_]{0,63}\\Z(?!\\n)')
}

NoneType = type(None)

def validate_https___tiny_cli_invalid_card_schema_json(data, custom_formats={}, name_prefix=None):
    if not isinstance(data, (dict)):
        raise JsonSchemaValueException("" + (name_prefix or "data") + " must be object")
    data_any_of_count1 = 0
    if not data_any_of_count1:
        try:
            data_is_dict = isinstance(data, dict)
            if data_is_dict:
                data__missing_keys = set(['returns_required']) - data.keys()
                if data__missing_keys:
                    raise JsonSchemaValueException("" + (name_prefix or "data") + " must contain ")
            data_any_of_count1 += 1
        except (JsonSchemaValueException, JsonSchemaValuesException): pass
    if not data_any_of_count1:
        try:
            data_is_dict = isinstance(data, dict)
            if data_is_dict:
                data__missing_keys = set(['returns']) - data.keys()
                if data__missing_keys:
                    raise JsonSchemaValueException("" + (name_prefix or "data") + " must contain ")
            data_any_of_count1 += 1
        except (JsonSchemaValueException, JsonSchemaValuesException): pass
    if not data_any_of_count1:
        raise JsonSchemaValueException("" + (name_prefix or "data") + " cannot be validated by any definition")
    data_is_dict = isinstance(data, dict)
    if data_is_dict:
        data__missing_keys = set(['id', 'summary', 'tools']) - data.keys()
        if data__missing_keys:
            raise JsonSchemaValueException("" + (name_prefix or "data") + " must contain ")
        data_keys = set(data.keys())
        if "id" in data_keys:
            data_keys.remove("id")
            data__id = data["id"]
            if not isinstance(data__id, (str)):
                raise JsonSchemaValueException("" + (name_prefix or "data") + ".id must be string")
            if isinstance(data__id, str):
                if not REGEX_PATTERNS['^[a-z0-9][a-z0-9_-]{0,62}$(?!\\n)'].search(data__id):
                    raise JsonSchemaValueException("" + (name_prefix or "data") + ".id must match pattern ^[a-z0-9][a-z0-9_-]{0,62}$(?!\\n)")
        if "summary" in data_keys:
            data_keys.remove("summary")
            data__summary = data["summary"]
            if not isinstance(data__summary, (str)):
                raise JsonSchemaValueException("" + (name_prefix or "data") + ".summary must be string")
            if isinstance(data__summary, str):
                data__summary_len = len(data__summary)
                if data__summary_len < 10:
                    raise JsonSchemaValueException("" + (name_prefix or "data") + ".summary must be longer than or equal to 10 characters")
                if data__summary_len > 600:
                    raise JsonSchemaValueException("" + (name_prefix or "data") + ".summary must be shorter than or equal to 600 characters")
        if "examples" in data_keys:
            data_keys.remove("examples")
            data__examples = data["examples"]
            if not isinstance(data__examples, (list, tuple)):
                raise JsonSchemaValueException("" + (name_prefix or "data") + ".examples must be array")
            data__examples_is_list = isinstance(data__examples, (list, tuple))
            if data__examples_is_list:
                data__examples_len = len(data__examples)
                for data__examples_x, data__examples_item in enumerate(data__examples):
                    if not isinstance(data__examples_item, (str)):
                        raise JsonSchemaValueException("" + (name_prefix or "data") + ".examples[{data__examples_x}]".format(**locals()) + " must be string")
                    if isinstance(data__examples_item, str):
                        data__examples_item_len = len(data__examples_item)
                        if data__examples_item_len < 3:
                            raise JsonSchemaValueException("" + (name_prefix or "data") + ".examples[{data__examples_x}]".format(**locals()) + " must be longer than or equal to 3 characters")
        if "does_not" in data_keys:
            data_keys.remove("does_not")
            data__doesnot = data["does_not"]
            if not isinstance(data__doesnot, (list, tuple)):
                raise JsonSchemaValueException("" + (name_prefix or "data") + ".does_not must be array")
            data__doesnot_is_list = isinstance(data__doesnot, (list, tuple))
            if data__doesnot_is_list:
                data__doesnot_len = len(data__doesnot)
                for data__doesnot_x, data__doesnot_item in enumerate(data__doesnot):
                    if not isinstance(data__doesnot_item, (str)):
                        raise JsonSchemaValueException("" + (name_prefix or "data") + ".does_not[{data__doesnot_x}]".format(**locals()) + " must be string")
                    if isinstance(data__doesnot_item, str):
                        data__doesnot_item_len = len(data__doesnot_item)
                        if data__doesnot_item_len < 3:
                            raise JsonSchemaValueException("" + (name_prefix or "data") + ".does_not[{data__doesnot_x}]".format(**locals()) + " must be longer than or equal to 3 characters")
        if "instructions" in data_keys:
            data_keys.remove("instructions")
            data__instructions = data["instructions"]
            if not isinstance(data__instructions, (str)):
                raise JsonSchemaValueException("" + (name_prefix or "data") + ".instructions must be string")
            if isinstance(data__instructions, str):
                data__instructions_len = len(data__instructions)
                if data__instructions_len > 32000:
                    raise JsonSchemaValueException("" + (name_prefix or "data") + ".instructions must be shorter than or equal to 32000 characters")
        if "tools" in data_keys:
            data_keys.remove("tools")
            data__tools = data["tools"]
            if not isinstance(data__tools, (list, tuple)):
                raise JsonSchemaValueException("" + (name_prefix or "data") + ".tools must be array")
            data__tools_is_list = isinstance(data__tools, (list, tuple))
            if data__tools_is_list:
                def fn(var): return frozenset(dict((k, fn(v)) for k, v in var.items()).items()) if hasattr(var, "items") else tuple(fn(v) for v in var) if isinstance(var, (dict, list)) else (bool, var) if isinstance(var, bool) else var
                data__tools_len = len(data__tools)
                if data__tools_len > len(set(fn(data__tools_x) for data__tools_x in data__tools)):
                    raise JsonSchemaValueException("" + (name_prefix or "data") + ".tools must contain unique items")
                for data__tools_x, data__tools_item in enumerate(data__tools):
                    if not isinstance(data__tools_item, (str)):
                        raise JsonSchemaValueException("" + (name_prefix or "data") + ".tools[{data__tools_x}]".format(**locals()) + " must be string")
                    if isinstance(data__tools_item, str):
                        if not REGEX_PATTERNS['^(?:[A-Za-z_][A-Za-z0-9_-]{0,63}|[A-Za-z0-9][A-Za-z0-9_-]{0,31}\\.[A-Za-z0-9_.-]{1,128})$(?!\\n)'].search(data__tools_item):
                            raise JsonSchemaValueException("" + (name_prefix or "data") + ".tools[{data__tools_x}]".format(**locals()) + " must match pattern ^(?:[A-Za-z_][A-Za-z0-9_-]{0,63}|[A-Za-z0-9][A-Za-z0-9_-]{0,31}\\.[A-Za-z0-9_.-]{1,128})$(?!\\n)")
        if "functions" in data_keys:
            data_keys.remove("functions")
            data__functions = data["functions"]
            if not isinstance(data__functions, (list, tuple)):
                raise JsonSchemaValueException("" + (name_prefix or "data") + ".functions must be array")
            data__functions_is_list = isinstance(data__functions, (list, tuple))
            if data__functions_is_list:
                data__functions_len = len(data__functions)
                for data__functions_x, data__functions_item in enumerate(data__functions):
                    if not isinstance(data__functions_item, (dict)):
                        raise JsonSchemaValueException("" + (name_prefix or "data") + ".functions[{data__functions_x}]".format(**locals()) + " must be object")
                    data__functions_item_is_dict = isinstance(data__functions_item, dict)
                    if data__functions_item_is_dict:
                        data__functions_item__missing_keys = set(['name', 'parameters']) - data__functions_item.keys()
                        if data__functions_item__missing_keys:
                            raise JsonSchemaValueException("" + (name_prefix or "data") + ".functions[{data__functions_x}]".format(**locals()) + " must contain ")
                        data__functions_item_keys = set(data__functions_item.keys())
                        if "name" in data__functions_item_keys:
                            data__functions_item_keys.remove("name")
                            data__functions_item__name = data__functions_item["name"]
                            if not isinstance(data__functions_item__name, (str)):
                                raise JsonSchemaValueException("" + (name_prefix or "data") + ".functions[{data__functions_x}].name".format(**locals()) + " must be string")
                            if isinstance(data__functions_item__name, str):
                                if not REGEX_PATTERNS['^[A-Za-z_][A-Za-z0-9_-]{0,63}$(?!\\n)'].search(data__functions_item__name):
                                    raise JsonSchemaValueException("" + (name_prefix or "data") + ".functions[{data__functions_x}].name".format(**locals()) + " must match pattern ^[A-Za-z_][A-Za-z0-9_-]{0,63}$(?!\\n)")
                        if "description" in data__functions_item_keys:
                            data__functions_item_keys.remove("description")
                            data__functions_item__description = data__functions_item["description"]
                            if not isinstance(data__functions_item__description, (str)):
                                raise JsonSchemaValueException("" + (name_prefix or "data") + ".functions[{data__functions_x}].description".format(**locals()) + " must be string")
                            if isinstance(data__functions_item__description, str):
                                data__functions_item__description_len = len(data__functions_item__description)
                                if data__functions_item__description_len > 4000:
                                    raise JsonSchemaValueException("" + (name_prefix or "data") + ".functions[{data__functions_x}].description".format(**locals()) + " must be shorter than or equal to 4000 characters")
                        if "parameters" in data__functions_item_keys:
                            data__functions_item_keys.remove("parameters")
                            data__functions_item__parameters = data__functions_item["parameters"]
                            if not isinstance(data__functions_item__parameters, (dict)):
                                raise JsonSchemaValueException("" + (name_prefix or "data") + ".functions[{data__functions_x}].parameters".format(**locals()) + " must be object")
                        if data__functions_item_keys:
                            raise JsonSchemaValueException("" + (name_prefix or "data") + ".functions[{data__functions_x}]".format(**locals()) + " must not contain "+str(data__functions_item_keys)+" properties")
        if "returns_required" in data_keys:
            data_keys.remove("returns_required")
            data__returnsrequired = data["returns_required"]
            if not isinstance(data__returnsrequired, (list, tuple)):
                raise JsonSchemaValueException("" + (name_prefix or "data") + ".returns_required must be array")
            data__returnsrequired_is_list = isinstance(data__returnsrequired, (list, tuple))
            if data__returnsrequired_is_list:
                def fn(var): return frozenset(dict((k, fn(v)) for k, v in var.items()).items()) if hasattr(var, "items") else tuple(fn(v) for v in var) if isinstance(var, (dict, list)) else (bool, var) if isinstance(var, bool) else var
                data__returnsrequired_len = len(data__returnsrequired)
                if data__returnsrequired_len > len(set(fn(data__returnsrequired_x) for data__returnsrequired_x in data__returnsrequired)):
                    raise JsonSchemaValueException("" + (name_prefix or "data") + ".returns_required must contain unique items")
                for data__returnsrequired_x, data__returnsrequired_item in enumerate(data__returnsrequired):
                    if not isinstance(data__returnsrequired_item, (str)):
                        raise JsonSchemaValueException("" + (name_prefix or "data") + ".returns_required[{data__returnsrequired_x}]".format(**locals()) + " must be string")
                    if isinstance(data__returnsrequired_item, str):
                        if not REGEX_PATTERNS['^[A-Za-z_][A-Za-z0-9_]{0,63}$(?!\\n)'].search(data__returnsrequired_item):
                            raise JsonSchemaValueException("" + (name_prefix or "data") + ".returns_required[{data__returnsrequired_x}]".format(**locals()) + " must match pattern ^[A-Za-z_][A-Za-z0-9_]{0,63}$(?!\\n)")
        if "returns" in data_keys:
            data_keys.remove("returns")
            data__returns = data["returns"]
            if not isinstance(data__returns, (dict)):
                raise JsonSchemaValueException("" + (name_prefix or "data") + ".returns must be object")
            data__returns_is_dict = isinstance(data__returns, dict)
            if data__returns_is_dict:
                data__returns_keys = set(data__returns.keys())
                for data__returns_key in data__returns_keys:
                    if data__returns_key not in []:
                        data__returns_value = data__returns.get(data__returns_key)
                        if not isinstance(data__returns_value, (str, list, tuple, dict)):
                            raise JsonSchemaValueException("" + (name_prefix or "data") + ".returns.{data__returns_key}".format(**locals()) + " must be string or array or object")
                data__returns_len = len(data__returns)
                if data__returns_len != 0:
                    data__returns_property_names = True
                    for data__returns_key in data__returns:
                        try:
                            if not isinstance(data__returns_key, (str)):
                                raise JsonSchemaValueException("" + (name_prefix or "data") + ".returns must be string")
                            if isinstance(data__returns_key, str):
                                if not REGEX_PATTERNS['^[A-Za-z_][A-Za-z0-9_]{0,63}$(?!\\n)'].search(data__returns_key):
                                    raise JsonSchemaValueException("" + (name_prefix or "data") + ".returns must match pattern ^[A-Za-z_][A-Za-z0-9_]{0,63}$(?!\\n)")
                        except (JsonSchemaValueException, JsonSchemaValuesException):
                            data__returns_property_names = False
                    if not data__returns_property_names:
                        raise JsonSchemaValueException("" + (name_prefix or "data") + ".returns must be named by propertyName definition")
        if "side_effects" in data_keys:
            data_keys.remove("side_effects")
            data__sideeffects = data["side_effects"]
            if not (isinstance(data__sideeffects, str) and data__sideeffects == 'none' or isinstance(data__sideeffects, str) and data__sideeffects == 'write'):
                raise JsonSchemaValueException("" + (name_prefix or "data") + ".side_effects must be one of ['none', 'write']")
        if "budget" in data_keys:
            data_keys.remove("budget")
            data__budget = data["budget"]
            if not isinstance(data__budget, (dict)):
                raise JsonSchemaValueException("" + (name_prefix or "data") + ".budget must be object")
            data__budget_is_dict = isinstance(data__budget, dict)
            if data__budget_is_dict:
                data__budget_keys = set(data__budget.keys())
                if "max_tool_calls" in data__budget_keys:
                    data__budget_keys.remove("max_tool_calls")
                    data__budget__maxtoolcalls = data__budget["max_tool_calls"]
                    if not isinstance(data__budget__maxtoolcalls, (int)) and not (isinstance(data__budget__maxtoolcalls, float) and data__budget__maxtoolcalls.is_integer()) or isinstance(data__budget__maxtoolcalls, bool):
                        raise JsonSchemaValueException("" + (name_prefix or "data") + ".budget.max_tool_calls must be integer")
                    if isinstance(data__budget__maxtoolcalls, (int, float, Decimal)) and not isinstance(data__budget__maxtoolcalls, bool):
                        if data__budget__maxtoolcalls < 1:
                            raise JsonSchemaValueException("" + (name_prefix or "data") + ".budget.max_tool_calls must be bigger than or equal to 1")
                        if data__budget__maxtoolcalls > 1000:
                            raise JsonSchemaValueException("" + (name_prefix or "data") + ".budget.max_tool_calls must be smaller than or equal to 1000")
                if "max_output_tokens" in data__budget_keys:
                    data__budget_keys.remove("max_output_tokens")
                    data__budget__maxoutputtokens = data__budget["max_output_tokens"]
                    if not isinstance(data__budget__maxoutputtokens, (int)) and not (isinstance(data__budget__maxoutputtokens, float) and data__budget__maxoutputtokens.is_integer()) or isinstance(data__budget__maxoutputtokens, bool):
                        raise JsonSchemaValueException("" + (name_prefix or "data") + ".budget.max_output_tokens must be integer")
                    if isinstance(data__budget__maxoutputtokens, (int, float, Decimal)) and not isinstance(data__budget__maxoutputtokens, bool):
                        if data__budget__maxoutputtokens < 16:
                            raise JsonSchemaValueException("" + (name_prefix or "data") + ".budget.max_output_tokens must be bigger than or equal to 16")
                        if data__budget__maxoutputtokens > 200000:
                            raise JsonSchemaValueException("" + (name_prefix or "data") + ".budget.max_output_tokens must be smaller than or equal to 200000")
                if "max_wall_seconds" in data__budget_keys:
                    data__budget_keys.remove("max_wall_seconds")
                    data__budget__maxwallseconds = data__budget["max_wall_seconds"]
                    if not isinstance(data__budget__maxwallseconds, (int, float, Decimal)) or isinstance(data__budget__maxwallseconds, bool):
                        raise JsonSchemaValueException("" + (name_prefix or "data") + ".budget.max_wall_seconds must be number")
                    if isinstance(data__budget__maxwallseconds, (int, float, Decimal)) and not isinstance(data__budget__maxwallseconds, bool):
                        if data__budget__maxwallseconds > 86400:
                            raise JsonSchemaValueException("" + (name_prefix or "data") + ".budget.max_wall_seconds must be smaller than or equal to 86400")
                        if data__budget__maxwallseconds <= 0:
                            raise JsonSchemaValueException("" + (name_prefix or "data") + ".budget.max_wall_seconds must be bigger than 0")
                if data__budget_keys:
                    raise JsonSchemaValueException("" + (name_prefix or "data") + ".budget must not contain "+str(data__budget_keys)+" properties")
        if "model" in data_keys:
            data_keys.remove("model")
            data__model = data["model"]
            if not isinstance(data__model, (str)):
                raise JsonSchemaValueException("" + (name_prefix or "data") + ".model must be string")
            if isinstance(data__model, str):
                data__model_len = len(data__model)
                if data__model_len < 1:
                    raise JsonSchemaValueException("" + (name_prefix or "data") + ".model must be longer than or equal to 1 characters")
        if "tool_mode" in data_keys:
            data_keys.remove("tool_mode")
            data__toolmode = data["tool_mode"]
            if not (isinstance(data__toolmode, str) and data__toolmode == 'native' or isinstance(data__toolmode, str) and data__toolmode == 'json' or isinstance(data__toolmode, str) and data__toolmode == 'auto'):
                raise JsonSchemaValueException("" + (name_prefix or "data") + ".tool_mode must be one of ['native', 'json', 'auto']")
        if "first" in data_keys:
            data_keys.remove("first")
            data__first = data["first"]
            if not (isinstance(data__first, str) and data__first == 'any' or isinstance(data__first, str) and data__first == 'tool'):
                raise JsonSchemaValueException("" + (name_prefix or "data") + ".first must be one of ['any', 'tool']")
        if data_keys:
            raise JsonSchemaValueException("" + (name_prefix or "data") + " must not contain "+str(data_keys)+" properties")
    return data


validate_card = validate_https___tiny_cli_invalid_card_schema_json
