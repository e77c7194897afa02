import csv, sys
# Written by hand for Engram's extraction evaluation (Apache-2.0); see benches/data/README.md.
# Writes engram-chat.csv (run: python3 benches/data/engram-chat.py benches/data/engram-chat.csv).
# Each conversation: (personas of speaker 1, personas of speaker 2, lines) — written by hand for
# Engram's extraction evaluation; the persona lines are what each speaker reveals about themself.
convs = []
def c(p1, p2, lines):
    convs.append((p1, p2, lines))

c(["I do karate.", "I have no pets.", "I work as a lifeguard in the summer.", "I am not good at math."],
  ["My name is Jean-Luc.", "I grew up in Quebec.", "I can cook enchiladas.", "I have two sisters."],
  ["hey there, how's your week going?",
   "pretty good! I'm Jean-Luc by the way. My name is Jean-Luc, people mix it up a lot.",
   "nice to meet you. I just got back from karate practice, I do karate three times a week.",
   "that's awesome. I grew up in Quebec so we mostly did hockey.",
   "ha, I don't have any pets so my evenings are free for training.",
   "what do you do for work?",
   "during the summer I work as a lifeguard at the lake. the rest of the year I'm figuring it out.",
   "cool. I can cook enchiladas, that's about my only skill lol",
   "that's a great skill! I'm not good at math so I'm jealous of anyone with a skill.",
   "math isn't cooking though haha. I have two sisters and they both do the math in my family.",
   "lucky you, it was nice chatting!",
   "you too, take care"])

c(["I have been married for ten years.", "I live in Denver.", "I am a nurse.", "I never drink coffee."],
  ["I play the guitar.", "I sing in a band.", "I am vegan.", "I want to move to Spain."],
  ["good morning! how are you doing today?",
   "morning! tired, we had a gig last night. I play the guitar and sing in a band.",
   "oh fun! I just finished a night shift, I'm a nurse at the children's hospital.",
   "that sounds exhausting. do you live near the hospital?",
   "yes, I live in Denver, about ten minutes away. my husband picks me up usually, we have been married for ten years now.",
   "congrats on ten years! I'm vegan so the after party food was a struggle last night.",
   "haha I believe it. I never drink coffee but today I'm tempted.",
   "I want to move to Spain someday, they have great late night food.",
   "Spain sounds lovely.",
   "well get some rest!"])

c(["My name is Mary-Jane.", "I have a daughter named Emma.", "I teach high school chemistry.", "I run marathons."],
  ["I am retired.", "I used to be a pilot.", "I collect stamps.", "I live with my son."],
  ["hello, I'm new here. my name is Mary-Jane.",
   "welcome Mary-Jane! what brings you here?",
   "my daughter Emma signed me up. I have a daughter named Emma and she's eleven.",
   "that's sweet. I'm retired, so I have plenty of time for chatting.",
   "what did you do before retiring?",
   "I used to be a pilot, flew cargo planes for thirty years.",
   "wow. I teach high school chemistry, which feels tame compared to that.",
   "teaching is hard work! these days I collect stamps, very quiet hobby.",
   "I run marathons to stay sane during the school year.",
   "good for you. I live with my son now, he keeps me busy too.",
   "sounds like a full house!"])

c(["I am allergic to shellfish.", "I work at a bank.", "I have a cat named Miso.", "I am learning Japanese."],
  ["I am a college student.", "I study computer science.", "I work part time at a pizza place.", "I don't have a car."],
  ["hi! what are you up to?",
   "studying as always, I'm a college student. I study computer science at the state university.",
   "nice. I work at a bank, nothing as exciting as code.",
   "banks are stable at least. I work part time at a pizza place on weekends.",
   "free pizza? I'd be jealous but I'm allergic to shellfish and some places put shrimp on everything.",
   "we do have a shrimp pizza actually, sorry! how do you get to work?",
   "I take the train. you?",
   "I bike, I don't have a car.",
   "I am learning Japanese so I use the train time for flashcards.",
   "that's smart. any pets?",
   "I have a cat named Miso, she's a menace.",
   "haha love it"])

c(["I grew up on a farm.", "I have three brothers.", "I drive a truck for a living.", "I love country music."],
  ["I am a vegetarian.", "I live in Portland.", "I work from home.", "I have twin boys."],
  ["hey! where are you from?",
   "I live in Portland now but I'm originally from Ohio. you?",
   "I grew up on a farm in Kansas. I have three brothers, we all worked the fields.",
   "that sounds like a lot of hard work.",
   "it was! now I drive a truck for a living, long hauls across the midwest.",
   "I work from home, so I barely leave the house. my twin boys keep me company. I have twin boys who are four.",
   "twins! that's a handful. I love country music, it keeps me company on the road.",
   "I'm a vegetarian and the boys are picky so dinner is a negotiation.",
   "ha, I bet. good luck with that!"])

c(["I am a software engineer.", "I have been playing chess for twenty years.", "I don't eat meat.", "I live alone."],
  ["I am a dentist.", "I have a golden retriever.", "I go hiking every weekend.", "I was born in Mexico City."],
  ["hi, how's it going?",
   "good, just got home from the clinic. I'm a dentist.",
   "nice. I'm a software engineer, long day of meetings.",
   "meetings are the worst. I'm taking my golden retriever out later, I have a golden retriever named Sunny.",
   "dogs are great. I live alone, so maybe I should get one.",
   "you should! I go hiking every weekend with him.",
   "I mostly play chess, I have been playing chess for twenty years.",
   "impressive. I was born in Mexico City, and chess is big there too.",
   "oh cool. any good food recommendations? I don't eat meat.",
   "lots of great vegetarian tacos there!"])

c(["My name is Conor O'Brien.", "I am a firefighter.", "I have a wife and two kids.", "I enjoy fishing."],
  ["I am a graphic designer.", "I have a fear of heights.", "I speak French and Italian.", "I recently moved to Boston."],
  ["hey, I'm Conor. my name is Conor O'Brien.",
   "hi Conor! what do you do?",
   "I'm a firefighter here in the city.",
   "that's brave. I'm a graphic designer, I recently moved to Boston for a job.",
   "welcome to Boston! I have a wife and two kids, we love it here.",
   "good to hear. I speak French and Italian, but English is still hard for me sometimes.",
   "your English is great. on my days off I enjoy fishing out on the harbor.",
   "I'd go but I have a fear of heights, even boats make me nervous haha.",
   "boats are pretty low! but fair enough."])

c(["I am a single mom.", "I work night shifts at a factory.", "I love to read mystery novels.", "I am taking online classes."],
  ["I am a professional photographer.", "I travel a lot.", "I have never been married.", "I am allergic to cats."],
  ["evening! still up?",
   "yes, just got back from a shoot. I'm a professional photographer.",
   "cool! I work night shifts at a factory so this is my lunch break.",
   "oh wow. I travel a lot for work, so my sleep is all over the place too.",
   "I'm a single mom, so sleep is a luxury for me anyway.",
   "that's tough. I have never been married, no kids, so I can't imagine.",
   "it's worth it. I love to read mystery novels when I finally get a quiet moment.",
   "I am allergic to cats so no quiet evenings with a cat for me haha",
   "haha. I am taking online classes too, trying to become an accountant.",
   "good luck with that!"])

c(["I have a son in the army.", "I make pottery.", "I live near the beach.", "I had knee surgery last year."],
  ["I am a personal trainer.", "I eat six meals a day.", "I am from Australia.", "I can't swim."],
  ["hi there.",
   "g'day! I'm from Australia, just visiting.",
   "welcome! I live near the beach, you'll love it here.",
   "funny thing, I can't swim. an Australian who can't swim.",
   "haha that is funny. I make pottery in my garage, very dry hobby.",
   "I'm a personal trainer, so I'm always in the gym instead.",
   "I had knee surgery last year so I could use a trainer.",
   "happy to help! I eat six meals a day so my diet advice might not suit you.",
   "my son is the athletic one, I have a son in the army.",
   "you must be proud!"])

c(["I am a retired teacher.", "I have six grandchildren.", "I garden.", "I live in a small town."],
  ["I am studying to be a lawyer.", "I have a younger brother.", "I like to paint landscapes.", "I work at a coffee shop."],
  ["hello dear, how are you?",
   "hi! I'm good, busy studying. I'm studying to be a lawyer.",
   "that's wonderful. I'm a retired teacher, law was always too much reading for me.",
   "it is a lot of reading. I work at a coffee shop too, to pay for it.",
   "good for you. I have six grandchildren and one of them wants to be a lawyer as well.",
   "six! I only have a younger brother, our family dinners are small.",
   "I live in a small town so our dinners are the whole town haha.",
   "sounds nice. to relax I like to paint landscapes.",
   "lovely. I garden, it's my painting."])

c(["I was a marine.", "I own a motorcycle.", "I have diabetes.", "I work in construction."],
  ["I am a baker.", "I wake up at 4 am every day.", "I have been to thirty countries.", "I have a parrot."],
  ["morning!",
   "morning! I've been up since four. I wake up at 4 am every day for the bakery, I'm a baker.",
   "that's early. I work in construction so I'm an early riser too.",
   "what do you do on weekends?",
   "ride, I own a motorcycle. I was a marine, so I like a bit of adrenaline.",
   "thank you for your service! I have been to thirty countries but never on a motorcycle.",
   "thirty is a lot. I have diabetes, so your pastries are off limits for me, sadly.",
   "I make some sugar free ones! also I have a parrot that says good morning to customers.",
   "ha, amazing."])

c(["I am a pharmacist.", "I play the violin.", "I have two daughters.", "I am originally from Korea."],
  ["I am a mechanic.", "I restore old cars.", "I don't like sports.", "I live with my girlfriend."],
  ["hey, what's new?",
   "not much, fixing cars all day. I'm a mechanic.",
   "nice. I'm a pharmacist, so I count pills all day.",
   "haha. in my free time I restore old cars, currently a 1967 Mustang.",
   "that's a beautiful car. I play the violin in a community orchestra.",
   "fancy. I live with my girlfriend and she plays piano.",
   "you should jam! I have two daughters and they both hate practicing.",
   "kids. do you watch the game tonight?",
   "I don't really follow it. I'm originally from Korea, so baseball is my thing.",
   "I don't like sports honestly, my girlfriend watches them."])

c(["I am a veterinarian.", "I have three horses.", "I don't watch tv.", "I am getting married in June."],
  ["I am a high school senior.", "I play basketball.", "I want to be an engineer.", "My parents are divorced."],
  ["hi! long day?",
   "yeah, practice ran late. I play basketball for my school, I'm a high school senior.",
   "senior year, exciting! I'm a veterinarian, spent the day with a sick cow.",
   "gross but cool. I want to be an engineer, maybe civil.",
   "that's a great plan. I have three horses at home so animals never stop for me.",
   "horses are awesome. my parents are divorced so I split weekends between two houses.",
   "that must be hard. I don't watch tv, so I'm no help with show recommendations haha.",
   "haha that's fine. anything big coming up for you?",
   "I am getting married in June! planning is chaos.",
   "congrats!!"])

c(["I work as a translator.", "I speak four languages.", "I have lived in Berlin for five years.", "I bake bread every Sunday."],
  ["I am a police officer.", "I have a German shepherd.", "I like to play video games.", "I am divorced."],
  ["hello from Berlin!",
   "hey! Berlin, cool. do you live there?",
   "yes, I have lived in Berlin for five years now. I work as a translator.",
   "nice. I'm a police officer back in Texas, very different life.",
   "must be intense. I speak four languages, which is handy for the job.",
   "impressive. I have a German shepherd, he's my partner on the K9 unit.",
   "ha, a German connection. I bake bread every Sunday, it's my ritual.",
   "I like to play video games on Sundays, less useful than bread.",
   "everyone needs to relax.",
   "true. I am divorced, so my Sundays are quiet anyway."])

c(["I am a stay at home dad.", "I have a daughter and a son.", "I used to work in finance.", "I like to cook Italian food."],
  ["I am an artist.", "I live on a houseboat.", "I can't stand cold weather.", "I have a tattoo of a whale."],
  ["hey, how's your day?",
   "good! painting all morning, I'm an artist.",
   "cool. I'm a stay at home dad, so my day was snacks and school runs.",
   "sounds busy. how many kids?",
   "I have a daughter and a son, six and nine. I used to work in finance before they were born.",
   "big change! I live on a houseboat, so my space for painting is tiny.",
   "a houseboat sounds amazing. I like to cook Italian food, that's my creative outlet.",
   "love it. I can't stand cold weather, the boat gets freezing in winter.",
   "oh no. do you have any other quirks?",
   "I have a tattoo of a whale on my arm, people always ask about it."])

c(["I am a bus driver.", "I have two grandkids.", "I have been sober for ten years.", "I like crossword puzzles."],
  ["I am a nurse practitioner.", "I am from the Philippines.", "I sing in my church choir.", "I have a younger sister who is a doctor."],
  ["good evening.",
   "good evening! how was your day?",
   "long, I'm a bus driver and traffic was terrible.",
   "ugh. I'm a nurse practitioner so my day was long too.",
   "we're both tired then. I like crossword puzzles to unwind.",
   "I sing in my church choir, that's my way to unwind.",
   "beautiful. I have two grandkids who love to sing as well.",
   "I'm from the Philippines and everyone sings there haha. I have a younger sister who is a doctor and even she sings.",
   "a family of healers and singers! I have been sober for ten years and singing in the car helped a lot.",
   "that's wonderful, congratulations."])

with open(sys.argv[1], "w", newline="") as f:
    w = csv.writer(f, quoting=csv.QUOTE_MINIMAL)
    w.writerow(["user 1 personas", "user 2 personas", "Best Generated Conversation"])
    for p1, p2, lines in convs:
        text = "\n".join(f"User {1 + i % 2}: {l}" for i, l in enumerate(lines))
        w.writerow(["\n".join(p1), "\n".join(p2), text])
print(len(convs), "conversations")
