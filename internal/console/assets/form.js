// Forms generated from a JSON Schema, for answers and for "try it". The
// simple types get a control each — string (text; an enum a <select>),
// number and integer (a number box), boolean (a checkbox) — and an object
// of them a field per property; anything else is a JSON box. The form
// checks nothing itself (novalidate): toold checks the value as it checks
// any caller's, and its refusal is shown next to the form.
import { el } from './dom.js';

let serial = 0;

// build returns {node, value}: value() is the JSON value the form holds,
// or throws an Error saying which field cannot be read.
export function build(schema, { choices, label } = {}) {
  const id = 'f' + (++serial);
  if (choices && choices.length) return choiceField(id, label || 'Answer', choices);
  schema = schema && typeof schema === 'object' ? schema : {};
  if (schema.type === 'object' && schema.properties && typeof schema.properties === 'object') return objectFields(id, schema, label);
  return field(id, label || 'Answer', schema, true);
}

function choiceField(id, label, choices) {
  const fs = el('fieldset', {}, el('legend', {}, label));
  choices.forEach((c, i) => {
    const rid = id + '-' + i;
    fs.append(el('div', {}, el('input', { type: 'radio', name: id, id: rid, value: c }), ' ', el('label', { for: rid }, c)));
  });
  return {
    node: fs,
    value() {
      const picked = fs.querySelector('input:checked');
      if (!picked) throw new Error('pick one of the choices');
      return picked.value;
    },
  };
}

function objectFields(id, schema, label) {
  const required = new Set(schema.required || []);
  const fs = el('fieldset', {}, el('legend', {}, label || 'Arguments'));
  const fields = [];
  for (const [name, sub] of Object.entries(schema.properties)) {
    const f = field(id + '-' + name.replace(/[^A-Za-z0-9_-]/g, '_'), name + (required.has(name) ? ' (required)' : ''), sub || {}, required.has(name));
    fields.push([name, f]);
    fs.append(f.node);
  }
  return {
    node: fs,
    value() {
      const out = {};
      for (const [name, f] of fields) {
        const v = f.value();
        if (v !== undefined) out[name] = v;
      }
      return out;
    },
  };
}

// field is one control for a value of schema s; an optional field left
// empty is undefined (left out of its object).
function field(id, label, s, required) {
  const help = s.description ? el('small', { id: id + '-help' }, s.description) : null;
  const wrap = (control) => el('div', { class: 'field' }, el('label', { for: id }, label), control, help);
  const described = help ? id + '-help' : undefined;
  if (Array.isArray(s.enum)) {
    // Nothing is picked for the person: a required choice starts on a
    // placeholder that cannot be sent.
    const sel = el('select', { id, 'aria-describedby': described },
      required ? el('option', { value: '', disabled: true, selected: true }, '(choose one)') : el('option', { value: '' }, '(none)'),
      s.enum.map((v, i) => el('option', { value: String(i) }, typeof v === 'string' ? v : JSON.stringify(v))));
    return {
      node: wrap(sel),
      value() {
        if (sel.value === '' && required) throw new Error(label + ': choose one');
        return sel.value === '' ? undefined : s.enum[Number(sel.value)];
      },
    };
  }
  switch (s.type) {
    case 'boolean': {
      const box = el('input', { id, type: 'checkbox', checked: s.default === true, 'aria-describedby': described });
      return { node: wrap(box), value: () => box.checked };
    }
    case 'number':
    case 'integer': {
      const num = el('input', { id, type: 'number', step: s.type === 'integer' ? '1' : 'any', inputmode: 'decimal', 'aria-describedby': described });
      return {
        node: wrap(num),
        value() {
          const t = num.value.trim();
          if (t === '') {
            if (required) throw new Error(label + ': enter a number');
            return undefined;
          }
          const n = Number(t);
          if (!Number.isFinite(n)) throw new Error(label + ': "' + t + '" is not a number');
          return n;
        },
      };
    }
    case 'string': {
      const long = (s.maxLength || 0) > 200;
      const input = long ? el('textarea', { id, rows: 2, 'aria-describedby': described }) : el('input', { id, type: 'text', 'aria-describedby': described });
      return { node: wrap(input), value: () => (input.value === '' && !required ? undefined : input.value) };
    }
    default: {
      const box = el('textarea', { id, rows: 4, class: 'json', spellcheck: 'false', 'aria-describedby': described },
        s.default !== undefined ? JSON.stringify(s.default, null, 2) : '');
      return {
        node: wrap(box),
        value() {
          const t = box.value.trim();
          if (t === '') {
            if (required) throw new Error(label + ': enter a JSON value');
            return undefined;
          }
          try { return JSON.parse(t); } catch (e) { throw new Error(label + ': not JSON (' + e.message + ')'); }
        },
      };
    }
  }
}
