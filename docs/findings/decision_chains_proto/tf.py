"""Teacher-forced token accuracy by token role (copy vs compute) for a trained proto model."""
import sys, random, torch, importlib, collections
from pathlib import Path
sys.path.insert(0, str(Path(__file__).resolve().parents[3])); sys.path.insert(0, '.')
torch.set_num_threads(1)
from transformers import AutoModelForCausalLM, AutoTokenizer
from decision_pipeline.decision.prompts import chat_prefix, encode
from decision_pipeline.questions.schema import LABELS, assistant_answer, gold_index
fams=importlib.import_module(sys.argv[2]); path=sys.argv[1]
tok=AutoTokenizer.from_pretrained(path); m=AutoModelForCausalLM.from_pretrained(path); m.eval()
r=random.Random(777)
stats=collections.defaultdict(lambda:[0,0])
for f in sys.argv[3].split(','):
  for lv in range(5):
    for _ in range(15):
      q=fams.FAMILIES[f](r,lv)
      pre=encode(tok,chat_prefix(tok,q)); comp=encode(tok,assistant_answer(q,LABELS[gold_index(q)],q['trace']))
      ids=torch.tensor([pre+comp])
      with torch.no_grad(): lg=m(input_ids=ids).logits[0]
      pred=lg[len(pre)-1:-1].argmax(-1).tolist()
      qtoks=set(pre)
      for i,t in enumerate(comp):
        s=tok.decode([t]).strip()
        prev=tok.decode(comp[max(0,i-2):i])
        if s.isdigit():
          role='digit:after=' if prev.rstrip().endswith('=') and i>=2 else 'digit:other'
        elif s in ('yes','no'): role='yesno'
        else: role='text'
        stats[(f,role)][0]+= pred[i]==t; stats[(f,role)][1]+=1
for k,(a,n) in sorted(stats.items()): print(k, n, round(a/n,3))
